"""The network lint's checks of every DDR access (``network_lint.py``): each in the burst form the model charges.

* The pointer ports (the weights, the parameters, the table): consecutive words from a base the loop does not
  change, with no condition, so that Vitis makes each loop's run one burst.
* The arena's three ports (``hls::burst_maxi``: the input boxes, the residual, the output; each two, ``name`` and
  ``name_hi``, where a word spreads over two ports, every access of the one beside the same on the other): in one
  loop at II 1
  over a box's or a tile's words, each run requested ``RUNS_AHEAD - 1`` runs before it starts (the first before
  the loop) and each write answered ``RUNS_AHEAD - 1`` runs late, so that ``RUNS_AHEAD`` are in flight and no run
  waits out a round trip (``fpga_network.layer_cycles``' ``in_flight``); ``RUNS_AHEAD`` the model's, within the
  ports' outstanding transactions; every word moved in a statement with no condition.

The counts themselves (a request's length against the words its loop moves, every write answered) are the
C-simulation's: the ``hls_burst_maxi.h`` test double aborts on any mismatch; each request is counted beside it
(``HDSE_IN_RUNS`` ...), and ``check_trips`` holds the runs to the bursts the model charges. Each function's arena
ports are named as the ports it is called with (``check_port_order``).
"""

from __future__ import annotations

import re
from typing import Any

from cost_models.fpga_costs import ARENA_OUTSTANDING, RUNS_AHEAD
from cost_models.fpga_network_ports import ARENA_PORTS, WEIGHT_PORTS
from hetero_dse.hls.network_lint_parts import constant, function_text
from hetero_dse.hls.network_run import arena_halves, weight_ports

__all__ = ["BURSTS", "arena_moves", "check_bursts", "check_halves", "check_port_order", "check_runs_in_flight"]

#: every pointer port's DDR access, as the model charges it
BURSTS = {**{w: rf"{w}\[base \+ it\]" for w in weight_ports(WEIGHT_PORTS[-1])},
          "params": r"params\[d\.bias_off \+ kt \* param_words \+ i\]", "table": r"table\[l \* DESCRIPTOR_WORDS \+ i\]"}

#: the arena's ports as a process names them (a read process's ``act`` is the box's, ``act_in``)
ARENA = ("act", "act_res", "act_out")
#: the C-simulation's counter of each port's runs (kernel.h), beside each request (a run's on both halves once)
COUNTERS = {"act": "HDSE_IN_RUNS", "act_res": "HDSE_RES_RUNS", "act_out": "HDSE_OUT_RUNS"}


def arena_moves(a_ports: int) -> dict[str, str]:
    """Each of the arena's ports (with ``a_ports`` 2 its ``_hi`` twin too) and the one statement that moves a word
    on it: a word read whole, or its two parts read and joined (``kernel.h``'s ``join``); a word written, or its
    two halves, each on its own port."""
    if a_ports == 1:
        return {"act": "act.read()", "act_res": "act_res.read()", "act_out": "act_out.write(o)"}
    return {**{f"{p}{h}": f"join({p}.read(), {p}_hi.read())" for p in ("act", "act_res") for h in arena_halves(2)},
            "act_out": "act_out.write(half(o, 0));", "act_out_hi": "act_out_hi.write(half(o, 1));"}

#: the loop over a box's or a tile's words, its body pipelined at II 1 (``read_in``; the write's two)
WORD_LOOP = re.compile(r"(read_in|write_res|write): for \(int t = 0; t < runs \* run_words; \+\+t\) \{\n"
                       r"\s*#pragma HLS PIPELINE II=1\n")
#: a request as ``request_run`` in kernel.cpp.j2 writes it: a run of ``run_words`` words, its pixel advanced after
REQUEST = re.compile(r"((?:\w+\.read_request\([^;]*, run_words\);\n\s*)+)if \(whole\) \{\n")
#: the blocks a request may sit in: before the loop, the first ``RUNS_AHEAD - 1`` runs; in it, as a run starts
FIRST, NEXT = "request_first: for (; q < runs && q < RUNS_AHEAD - 1; ++q) {", "if (i == 0 && q < runs) {"
#: the first requests (``request_run``: the request, the next run's pixel, the run counted), then (the next word's
#: counter between) the loop over the words
FOLLOWED = re.compile(re.escape(FIRST) + r"\n\s*(\w+)\.read_request(?:[^\n]*\n){7,8}\s*hdse_count\(HDSE_\w+\);\n"
                      r"\s*\}\n(?:\s*int i = 0;[^\n]*\n)?\s*" + WORD_LOOP.pattern)


def check_bursts(source: str, add: Any) -> None:
    """Each pointer port's accesses are the model's bursts: the one form above, in a statement with no condition;
    the arena's ports are never indexed as pointers."""
    for port, form in BURSTS.items():
        for m in re.finditer(rf"(?<![\w.]){port}\[[^\]]*\]", source):
            line = _line(source, m.start(), m.end())
            if not re.fullmatch(form, m.group(0)) or "?" in line or re.match(r"\s*if\b", line):
                add("burst", port, f"`{line.strip()}`: not a run of consecutive words read or written with no "
                                   "condition, so Vitis makes no burst of it (the model charges one)")
    for port in [f"{p}{h}" for p in (*ARENA, "act_in") for h in arena_halves(ARENA_PORTS[-1])]:
        for m in re.finditer(rf"(?<![\w.]){port}\[[^\]]*\]", source):
            add("burst", port, f"`{_line(source, m.start(), m.end()).strip()}`: the arena's port indexed as a pointer; "
                               "the model charges its runs requested ahead (hls::burst_maxi)")


def check_runs_in_flight(source: str, header: str, pragmas: list[Any], readers: list[str], writers: list[str],
                         add: Any, a_ports: int = 1) -> None:
    """The arena's runs kept in flight as the model charges them: ``readers`` (the box read processes) request
    their runs ahead; ``writers`` request each run as it starts, take each response ``RUNS_AHEAD - 1`` runs late and
    the tile's last at its end, and request the residual's runs ahead. Every word moves in the one loop over a box's
    or a tile's words, at II 1, in no block but that loop's body; the ports' adapters allow the transactions the
    model charges their buffers (``ARENA_OUTSTANDING``), twice the runs in flight. ``a_ports``: each stream's
    ports (two: ``name`` and ``name_hi``, each held to the same)."""
    halves = arena_halves(a_ports)
    moves = arena_moves(a_ports)
    ahead = constant(header, "RUNS_AHEAD")
    define = re.search(r"#define HDSE_RUNS_AHEAD (\d+)\n", header)
    if ahead != RUNS_AHEAD or define is None or int(define.group(1)) != RUNS_AHEAD:
        add("burst", "kernel.h", f"RUNS_AHEAD is {ahead} (HDSE_RUNS_AHEAD {define and define.group(1)}): the model "
                                 f"keeps {RUNS_AHEAD} runs in flight, half the arena ports' {ARENA_OUTSTANDING} "
                                 "transactions (more could stall the loop that must free them)")
    for port, option in [(f"{p}{h}", o) for p, o in (("act_in", "num_read_outstanding"),
                                                      ("act_res", "num_read_outstanding"),
                                                      ("act_out", "num_write_outstanding")) for h in halves]:
        got = [p.get(option) for p in pragmas if p.name == "INTERFACE" and p.get("port") == port
               and p.get("mode") == "m_axi"]
        if got != [str(ARENA_OUTSTANDING)]:
            add("interface", port, f"{option} {got}: the model charges {ARENA_OUTSTANDING} transactions' buffer and "
                                   f"keeps {RUNS_AHEAD} runs in flight on it")
    for fn_name, ports in [(f, ("act",)) for f in readers] + [(f, ("act_res", "act_out")) for f in writers]:
        text = function_text(source, fn_name)
        for port in [f"{p}{h}" for p in ports for h in halves]:
            base = port.removesuffix("_hi")
            at_moves = [m.start() for m in re.finditer(re.escape(moves[port]), text)]
            if not at_moves:
                add("burst", fn_name, f"moves no word on {port}")
            for at in at_moves:
                line = _line(text, at, at)
                if "?" in line or re.match(r"\s*(if|else)\b", line) or not _in_word_loop(text, at, 0):
                    add("burst", fn_name, f"`{line.strip()}`: a word of {port} moved outside the loop "
                                          "over the words at II 1, or under a condition in it; the model moves a "
                                          "run's words a cycle each")
            if text.count(f"hdse_count({COUNTERS[base]});") != 2:  # the C-simulation's count beside each request
                add("trips", fn_name, f"{port}'s runs are not each counted as requested ({COUNTERS[port]}): the "
                                      "C-simulation cannot hold them to the bursts the model charges")
            if base == "act_out":
                _check_write_responses(text, fn_name, add, port)
                continue
            requests = [m for m in REQUEST.finditer(text) if port in re.findall(r"(\w+)\.read_request", m.group(1))]
            blocks = sorted(_blocks(text, m.start())[0] for m in requests)
            nexts = [m for m in requests if _blocks(text, m.start())[0] == NEXT and _in_word_loop(text, m.start(), 1)]
            follows = [m.group(1) for m in FOLLOWED.finditer(text)].count(base) == 1
            if blocks != sorted([FIRST, NEXT]) or len(nexts) != 1 or text.count(f"{port}.read_request(") != 2:
                add("burst", fn_name, f"{port}'s runs are not each requested RUNS_AHEAD - 1 runs before they start "
                                      "(the first before the loop over the words, the next as a run starts in it): "
                                      "each would wait out a round trip the model does not charge")
            elif not follows:
                add("burst", fn_name, f"{port}'s first requests are not followed by the loop over the words")


def _check_write_responses(text: str, fn_name: str, add: Any, port: str = "act_out") -> None:
    """The write process: each run's write requested as the run starts, its response taken RUNS_AHEAD - 1 runs
    later at a run's last word (both in the loop at II 1, in each of its two loops), and the tile's last responses
    before its next tile (``port``: ``act_out`` or its ``_hi`` twin, both answered in the one loop)."""
    requests = [m.start() for m in re.finditer(rf"{port}\.write_request\([^;]*,\s*run_words\);", text)]
    answers = [m.start() for m in re.finditer(rf"if \(r \+ 1 >= RUNS_AHEAD\) {port}\.write_response\(\);", text)]
    drain = (r"\n\s*answer: for \(int a = runs < RUNS_AHEAD \? 0 : runs \+ 1 - RUNS_AHEAD; a < runs; \+\+a\) "
             rf"(?:{port}\.write_response\(\);\n|\{{\n\s*act_out\.write_response\(\);\n\s*act_out_hi\.write_response\(\);"
             r"\n\s*\}\n)")
    placed = [_blocks(text, at)[0] == "if (i == 0) {" and _in_word_loop(text, at, 1) for at in requests] + \
             [_blocks(text, at)[0] == "if (++i == run_words) {" and _in_word_loop(text, at, 1) for at in answers]
    if placed != [True] * 4 or len(re.findall(drain, text)) != 1 or text.count(f"{port}.write_response()") != 3 or \
            text.count(f"{port}.write_request(") != 2:
        add("burst", fn_name, "its runs are not each requested as they start and answered RUNS_AHEAD - 1 runs late "
                              "(the tile's last at its end): a run that waits for its response pays a round trip "
                              "the model does not charge, and one never answered may not be in memory")


def _blocks(text: str, at: int) -> list[str]:
    """The heads of the blocks open at ``at``, innermost first: each the line of its ``{`` up to the brace (the
    generated code opens a block at a line's end, a comment after it at most)."""
    heads, depth = [], 0
    for i in range(at - 1, -1, -1):
        if text[i] == "}":
            depth += 1
        elif text[i] == "{":
            if depth:
                depth -= 1
            else:
                heads.append(text[text.rfind("\n", 0, i) + 1:i + 1].strip())
    return heads


def _in_word_loop(text: str, at: int, depth: int) -> bool:
    """Whether ``at`` sits ``depth`` blocks inside the loop over a box's or a tile's words (0: in its body itself),
    that loop pipelined at II 1 and itself in no other loop over words."""
    heads = _blocks(text, at)
    if len(heads) <= depth:
        return False
    loop = heads[depth]
    start = text.rfind(loop, 0, at)
    return WORD_LOOP.match(text, start) is not None and not any(WORD_LOOP.match(h + "\n") for h in heads[depth + 1:])


def _line(text: str, start: int, end: int) -> str:
    return text[text.rfind("\n", 0, start) + 1:text.find("\n", end)]


def check_port_order(source: str, add: Any) -> None:
    """Each arena port passed down under its own name: every function's ``hls::burst_maxi`` parameters in the order
    of the ports it is called with (a read process's ``act`` is the box's, ``act_in``). Names swapped in a signature
    would send a stream through another port, whose adapter is sized for the other direction (ALIAS keeps the
    C-simulation blind to it: the three ports are one buffer)."""
    canonical = {"act": "act_in", "act_hi": "act_in_hi"}
    for m in re.finditer(r"static void (\w+)\(([^{;]*?)\)\s*\{", source):
        params = [canonical.get(n, n) for n in re.findall(r"hls::burst_maxi<(?:word|part)_t>\s+(\w+)", m.group(2))]
        if not params:
            continue
        for call in re.finditer(rf"\b{m.group(1)}(?:<[^;()]*>)?\(([^;]*)\);", source):
            passed = [canonical.get(a + b, a + b)
                      for a, b in re.findall(r"\b(act_in|act_res|act_out|act)((?:_hi)?)\b", call.group(1))]
            if passed != params:
                add("interface", m.group(1), f"its ports {params} are called with {passed}: a stream would move "
                                             "through another port's adapter")


def check_halves(source: str, add: Any) -> None:
    """Where a word spreads over two ports, each of its streams' accesses on ``name`` beside the same on
    ``name_hi``: each request at the same address and length, each response, in the same order (a part requested
    elsewhere would join with another word's part; the C-simulation sees a missing one only as a stall)."""
    for port in ARENA:
        for call in ("read_request", "write_request", "write_response"):
            first = re.findall(rf"(?<![\w.]){port}\.{call}\(([^;]*)\);", source)
            second = re.findall(rf"(?<![\w.]){port}_hi\.{call}\(([^;]*)\);", source)
            if [" ".join(a.split()) for a in first] != [" ".join(a.split()) for a in second]:
                add("burst", port, f"its {call}s on {port} and {port}_hi differ ({len(first)} and {len(second)}, or at "
                                   "other addresses): a word's two parts would come from different words")
