"""Board files: every packaged board loads; a bad file is named with its field."""

from __future__ import annotations

import pytest
import yaml

from cost_models.fpga_slrs import slr_room
from hetero_dse.hardware.board import RESOURCE_KINDS, board_names, list_boards, load_board
from hetero_dse.errors import BoardError
from hetero_dse.resources import data_dir

REQUIRED_BOARDS = {"vu9p", "u200", "u250", "u280", "zcu102", "zcu104", "pynq-z2", "kv260"}


def test_packaged_boards():
    assert REQUIRED_BOARDS <= set(board_names())
    for board in list_boards():
        assert board.name == board.path.stem
        assert board.memory.bandwidth_gbps > 0
        assert all(0 < board.usable[r] <= 1 for r in RESOURCE_KINDS)
        assert {"resources", "memory"} <= set(board.sources)


def test_vu9p_figures_and_caps():
    b = load_board("VU9P")
    assert b.part == "xcvu9p-flgb2104-2-i"
    assert (b.resources["dsp"], b.resources["bram18k"], b.resources["uram"]) == (6840, 4320, 960)
    # 70 % of what the shell leaves kernels (2,265 + 1,317 + 2,265 DSPs over its SLRs), the budget each SLR's room
    # takes its share of too: the whole part's 4,788 would let one kernel take 82 % of what it can have
    assert b.kernel_resources("dsp") == 5847 and b.cap("dsp") == 4092
    assert b.cap("dsp") == pytest.approx(slr_room(b)[:, RESOURCE_KINDS.index("dsp")].sum(), abs=1)
    zcu102 = load_board("zcu102")  # no shell counted: the whole part's
    assert zcu102.kernel_resources("dsp") == 2520 and zcu102.cap("dsp") == 2016
    assert b.memory.channels == 4 and b.memory.bandwidth_gbps == 64.0


def test_u280_uses_hbm_first():
    b = load_board("u280")
    assert b.memory.kind == "hbm2" and b.memory.channels == 32
    assert b.memory.bandwidth_gbps == pytest.approx(460.0)
    assert b.memories[1].kind == "ddr4"


@pytest.fixture
def board_file(tmp_path):
    """Write a copy of vu9p.yaml with one change; returns its path."""

    def make(edit) -> str:
        raw = yaml.safe_load((data_dir("boards") / "vu9p.yaml").read_text())
        edit(raw)
        path = tmp_path / "my_board.yaml"
        path.write_text(yaml.safe_dump(raw))
        return str(path)

    return make


def test_the_shells_slr_resources_are_read():
    """vu9p's SLRs as the platform leaves them to kernels (UG1393's platforminfo, the shell in SLR1)."""
    b = load_board("vu9p")
    assert [r["dsp"] for r in b.slr_resources] == [2265, 1317, 2265] and b.slr_resources[1]["lut"] == 159739
    assert load_board("u280").slr_resources is None and "slr_resources" in b.sources


def test_user_board_file_loads(board_file):
    path = board_file(lambda r: r.update(name="my_board"))
    assert load_board(path).name == "my_board"


@pytest.mark.parametrize("edit,message", [
    (lambda r: r["resources"].pop("dsp"), "missing field resources.dsp"),
    (lambda r: r.pop("memory"), "missing field memory"),
    (lambda r: r["resources"].update(dsp=-5), "field resources.dsp must be at least 0, got -5"),
    (lambda r: r["resources"].update(bram18k="lots"), "field resources.bram18k must be of type integer, got 'lots'"),
    (lambda r: r["usable"].update(lut=1.5), "field usable.lut must be at most 1, got 1.5"),
    (lambda r: r["memory"][0].pop("bandwidth_gbps_per_channel"), "missing field memory.0.bandwidth_gbps_per_channel"),
    (lambda r: r["memory"][0].update(kind="sram"), "field memory.0.kind must be one of"),
    (lambda r: r.update(dsps=5), "unknown field dsps"),
    (lambda r: r["clock"].update(default_mhz=400), "field clock.default_mhz (400) is above clock.max_mhz (300)"),
    (lambda r: r["slr_resources"].pop(), "slr_resources lists 2 SLRs; the part has 3 (field slrs)"),
    (lambda r: r["slr_resources"][1].pop("uram"), "missing field slr_resources.1.uram"),
    (lambda r: [s.update(dsp=0) for s in r["slr_resources"]],
     "resources.dsp and resources.lut must be above 0 (the PE array is built from them), got 0 and 869268 left by "
     "the shell over slr_resources"),
    (lambda r: r["slr_resources"][0].update(dsp=6000),
     "slr_resources leave kernels 9,582 DSP over the SLRs, more than the part's 6,840 (field resources.dsp)"),
])
def test_bad_board_file_names_file_and_field(board_file, edit, message):
    path = board_file(edit)
    with pytest.raises(BoardError) as info:
        load_board(path)
    assert str(info.value).startswith(f"board file {path}: ")
    assert message in str(info.value)


def test_unknown_board_name_lists_known_ones():
    with pytest.raises(BoardError, match=r"unknown board 'vu9' \(did you mean vu9p\?\); known boards: kv260"):
        load_board("vu9")


def test_board_file_problems(tmp_path):
    with pytest.raises(BoardError, match="does not exist"):
        load_board(tmp_path / "nope.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: x\nresources: [1, 2\n")
    with pytest.raises(BoardError, match=r"broken.yaml is not valid YAML at line 3"):
        load_board(broken)
    listing = tmp_path / "list.yaml"
    listing.write_text("- 1\n- 2\n")
    with pytest.raises(BoardError, match="must hold a mapping of fields, not list"):
        load_board(listing)
