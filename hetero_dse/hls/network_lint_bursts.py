"""The network lint's checks of every DDR access (``network_lint.py``): each in the burst form the model charges.

* The pointer ports (the weights, the parameters, the table): consecutive words from a base the loop does not
  change, with no condition, so that Vitis makes each loop's run one burst.
* The arena's three ports (``hls::burst_maxi``: the input boxes, the residual, the output): in one loop at II 1
  over a box's or a tile's words, each run requested ``RUNS_AHEAD - 1`` runs before it starts (the first before
  the loop) and each write answered ``RUNS_AHEAD - 1`` runs late, so that ``RUNS_AHEAD`` are in flight and no run
  waits out a round trip (``fpga_network.layer_cycles``' ``in_flight``); ``RUNS_AHEAD`` the model's, within the
  ports' outstanding transactions; every word moved in a statement with no condition.

The counts themselves (a request's length against the words its loop moves, every write answered) are the
C-simulation's: the ``hls_burst_maxi.h`` test double aborts on any mismatch.
"""

from __future__ import annotations

import re
from typing import Any

from cost_models.fpga_costs import NETWORK_OUTSTANDING
from cost_models.fpga_network_ports import WEIGHT_PORTS
from hetero_dse.hls.network_lint_parts import constant, function_text
from hetero_dse.hls.network_run import weight_ports

__all__ = ["BURSTS", "check_bursts", "check_runs_in_flight"]

#: every pointer port's DDR access, as the model charges it
BURSTS = {**{w: rf"{w}\[base \+ it\]" for w in weight_ports(WEIGHT_PORTS[-1])},
          "params": r"params\[d\.bias_off \+ kt \* param_words \+ i\]", "table": r"table\[l \* DESCRIPTOR_WORDS \+ i\]"}

#: the arena's ports and the one call that moves a word on each
ARENA = {"act": "act.read()", "act_res": "act_res.read()", "act_out": "act_out.write(o)"}

#: a read process's requests (``request_run`` in kernel.cpp.j2): its first ``RUNS_AHEAD - 1`` runs before its loop,
#: then, in the loop at II 1, the next as each run starts, so that ``RUNS_AHEAD`` are in flight; each of
#: ``run_words`` words, the run's pixel advanced after it
REQUEST_FIRST = re.compile(r"request_first: for \(; q < runs && q < RUNS_AHEAD - 1; \+\+q\) \{\n"
                           r"\s*(\w+)\.read_request\([^;]*, run_words\);\n\s*if \(whole\) \{\n")
REQUEST_NEXT = re.compile(r"if \(i == 0 && q < runs\) \{  //[^\n]*\n\s*(\w+)\.read_request\([^;]*, run_words\);\n"
                          r"\s*if \(whole\) \{\n(?:[^\n]*\n){5}\s*\+\+q;\n")


def check_bursts(source: str, add: Any) -> None:
    """Each pointer port's accesses are the model's bursts: the one form above, in a statement with no condition;
    the arena's ports are never indexed as pointers."""
    for port, form in BURSTS.items():
        for m in re.finditer(rf"(?<![\w.]){port}\[[^\]]*\]", source):
            line = _line(source, m.start(), m.end())
            if not re.fullmatch(form, m.group(0)) or "?" in line or re.match(r"\s*if\b", line):
                add("burst", port, f"`{line.strip()}`: not a run of consecutive words read or written with no "
                                   "condition, so Vitis makes no burst of it (the model charges one)")
    for port in ARENA:
        for m in re.finditer(rf"(?<![\w.]){port}\[[^\]]*\]", source):
            add("burst", port, f"`{_line(source, m.start(), m.end()).strip()}`: the arena's port indexed as a pointer; "
                               "the model charges its runs requested ahead (hls::burst_maxi)")


def check_runs_in_flight(source: str, header: str, readers: list[str], writers: list[str], add: Any) -> None:
    """The arena's runs kept in flight as the model charges them: ``readers`` (the box read processes) request
    their runs ahead; ``writers`` request each run before its words, take each response ``RUNS_AHEAD`` runs late
    and the tile's last at its end, and request the residual's runs ahead."""
    ahead = constant(header, "RUNS_AHEAD")
    define = re.search(r"#define HDSE_RUNS_AHEAD (\d+)\n", header)
    if ahead != NETWORK_OUTSTANDING or define is None or int(define.group(1)) != NETWORK_OUTSTANDING:
        add("burst", "kernel.h", f"RUNS_AHEAD is {ahead} (HDSE_RUNS_AHEAD {define and define.group(1)}): the model "
                                 f"keeps {NETWORK_OUTSTANDING} runs in flight, the ports' outstanding transactions "
                                 "(more would stall the process that must read them)")
    for fn_name, ports in [(f, ("act",)) for f in readers] + [(f, ("act_res", "act_out")) for f in writers]:
        text = function_text(source, fn_name)
        first = REQUEST_FIRST.findall(text)
        starts = [m for m in REQUEST_NEXT.finditer(text) if _in_pipelined_loop(text, m.start())]
        for port in ports:
            if not text.count(ARENA[port]):
                add("burst", fn_name, f"moves no word on {port}")
            for m in re.finditer(re.escape(ARENA[port]), text):
                line = _line(text, m.start(), m.end())
                if "?" in line or re.match(r"\s*(if|else)\b", line) or not _in_pipelined_loop(text, m.start()):
                    add("burst", fn_name, f"`{line.strip()}`: a word of {port} moved under a condition or outside a "
                                          "loop at II 1; the model moves a run's words a cycle each")
            if port == "act_out":
                _check_write_responses(text, fn_name, add)
            elif first.count(port) != 1 or [m.group(1) for m in starts].count(port) != 1 or \
                    text.count(f"{port}.read_request(") != 2:
                add("burst", fn_name, f"{port}'s runs are not each requested RUNS_AHEAD - 1 runs before their words "
                                      "(the first before the loop, the next as a run starts in it): each would wait "
                                      "out a round trip the model does not charge")


def _check_write_responses(text: str, fn_name: str, add: Any) -> None:
    """The write process: each run's write requested as the run starts, its response taken RUNS_AHEAD - 1 runs
    later at a run's last word (both in the loop at II 1, in each of its two loops), and the tile's last responses
    before its next tile."""
    request = r"if \(i == 0\) \{  //[^\n]*\n\s*act_out\.write_request\([^;]*,\s*run_words\);\n"
    answer = (r"if \(\+\+i == run_words\) \{  //[^\n]*\n\s*i = 0;\n"
              r"\s*if \(r \+ 1 >= RUNS_AHEAD\) act_out\.write_response\(\);\n")
    drain = (r"\n\s*answer: for \(int a = runs < RUNS_AHEAD \? 0 : runs \+ 1 - RUNS_AHEAD; a < runs; \+\+a\) "
             r"act_out\.write_response\(\);\n")
    loops = [len([m for m in re.finditer(f, text) if _in_pipelined_loop(text, m.start())]) for f in (request, answer)]
    if loops != [2, 2] or len(re.findall(drain, text)) != 1 or text.count("act_out.write_response()") != 3 or \
            text.count("act_out.write_request(") != 2:
        add("burst", fn_name, "its runs are not each requested as they start and answered RUNS_AHEAD - 1 runs late "
                              "(the tile's last at its end): a run that waits for its response pays a round trip "
                              "the model does not charge, and one never answered may not be in memory")


def _in_pipelined_loop(text: str, at: int) -> bool:
    """Whether the innermost loop open at ``at`` is pipelined at II 1 (the pragma its body's first line)."""
    for head in reversed(list(re.finditer(r"\b\w+: for \([^)]*\) \{\n", text[:at]))):
        body = text[head.end():at]
        if body.count("{") >= body.count("}"):  # still open at ``at``: the innermost loop around it
            return re.match(r"\s*#pragma HLS PIPELINE II=1\n", body) is not None
    return False


def _line(text: str, start: int, end: int) -> str:
    return text[text.rfind("\n", 0, start) + 1:text.find("\n", end)]
