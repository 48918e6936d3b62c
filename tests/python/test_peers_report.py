"""The peers' side of the instrument without a GPU: report.py merges peers.json (bench/gpu/peers.py) into the
side-by-side table with Fovea divided by the best peer per row; peers.py asks the questions of `fovea bench
--questions` and gives LMDeploy Fovea's own chat template."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "gpu"))
import common  # noqa: E402
import peers  # noqa: E402
import peers_report  # noqa: E402
import report  # noqa: E402


def peer_run(q1, q4=None, q16=None, status="ok"):
    phases = {"q1": {"qpm": q1, "requests": 200, "prompt_tokens_mean": 3360.0, "fovea_prompt_tokens_mean": 3360.0,
                     "prompt_tokens_equal_fovea": 200, "vs_reference": {"n": 64, "agree": 60, "pct": 93.75}}}
    if q4:
        phases["q4"] = {"qpm": q4}
    if q16:
        phases["q16"] = {"qpm": q16}
    return {"status": status, "phases": phases, "settings": {"enable_prefix_caching": True},
            "gpu_memory_peak_mib": 70000}


def run_data():
    peers_json = {"versions": {"lmdeploy": "0.18.0", "vllm": "0.20.0"}, "runs": {
        "lmdeploy/bf16": peer_run(520.0, 510.0, 505.0), "lmdeploy/fp8": peer_run(600.0),
        "vllm/bf16": peer_run(540.0, 724.0, 900.0),
        "vllm/fp8": {"status": "timeout", "log_tail": "loading...\nKilled | late"}}}
    return {"fovea": {"official": {"qpm_steady": 594.0}, "fp8": {"qpm_steady": 780.0}},
            "questions": {"k4": {"qpm": 2200.0}, "k16": {"qpm": 7800.0}},
            "ref": {"e2e": {"qpm": 217.0}}, "derived": {"floor_qpm_bf16_sustained": 660.0,
                                                        "floor_qpm_fp8_sustained": 1019.0},
            "peers": peers_json}


def test_fovea_is_divided_by_the_best_peer_of_each_row():
    table = peers_report.comparison(run_data())
    assert table["q1/bf16"]["best_peer"] == 540.0
    assert table["q1/bf16"]["x_best_peer"] == pytest.approx(594.0 / 540.0)
    assert table["q4/bf16"]["x_best_peer"] == pytest.approx(2200.0 / 724.0)
    assert table["q16/bf16"]["x_best_peer"] == pytest.approx(7800.0 / 900.0)
    # vLLM's FP8 timed out: the best FP8 peer is LMDeploy's
    assert table["q1/fp8"]["vllm"] is None
    assert table["q1/fp8"]["x_best_peer"] == pytest.approx(780.0 / 600.0)


def test_rows_without_figures_render_as_dashes_and_failures_show_their_last_log_line():
    data = run_data()
    del data["questions"]["k16"]
    text = "\n".join(peers_report.render_lines(data))
    assert "| 16 questions per photo: QPM per question | — | 505.0 | 900.0 | — | — | — |" in text
    assert "| 1 question per photo, official tiling, bf16: QPM | 594.0 | 520.0 | 540.0 | 217.0 | 660.0 | 1.10 |" in text
    assert "| vllm/fp8 | timeout: Killed / late |" in text
    assert "3360 (3360; equal in 200/200)" in text


def test_no_peers_json_leaves_the_report_as_it_was():
    assert peers_report.render_lines({"peers": None}) == []


def test_report_collects_peers_json_and_the_question_runs(tmp_path):
    common.write_json(str(tmp_path / "peers.json"), run_data()["peers"])
    common.write_json(str(tmp_path / "questions_k4.json"), {"qpm": 2200.0})
    data = report.collect(str(tmp_path))
    assert data["peers"]["runs"]["vllm/bf16"]["phases"]["q4"]["qpm"] == 724.0
    assert peers_report.comparison(data)["q4/bf16"]["fovea"] == 2200.0
    assert "## Peers (issue 26)" in report.render(data)


def test_questions_are_those_of_fovea_bench_and_requests_group_an_image():
    questions = peers.listing_questions()
    assert len(questions) == 16 and questions[0] == common.QUESTION and len(set(questions)) == 16
    requests = peers.phase_requests([{"id": "r0", "image": "a.jpg"}, {"id": "r1", "image": "b.jpg"}], 4, 2)
    assert [r[1] for r in requests] == ["a.jpg"] * 4 + ["b.jpg"] * 4
    assert len({r[0] for r in requests}) == 8
    assert peers.phase_requests([{"id": "r0", "image": "a.jpg"}], 1, 1) == [("r0", "a.jpg", 0)]


@pytest.mark.parametrize("name", sorted(common.TEMPLATES))
def test_lmdeploy_gets_fovea_s_chat_template(name):
    """BaseChatTemplate.messages2prompt of LMDeploy 0.18 concatenates system + meta_instruction + eosys + user +
    content + eoh + assistant: that must be Fovea's before/after text around the image block."""
    template = common.TEMPLATES[name]
    c = peers.lmdeploy_chat_template(template)
    content = "<img><IMG_CONTEXT></img>\n" + common.QUESTION
    rendered = c["system"] + c["meta_instruction"] + c["eosys"] + c["user"] + content + c["eoh"] + c["assistant"]
    assert rendered == (template["before_image"].format(system=template["system"]) + "<img><IMG_CONTEXT></img>"
                        + template["after_image"].format(question=common.QUESTION))


def test_the_work_line_gives_photos_and_the_computed_share_of_each_engine():
    data = run_data()
    data["fovea"]["official"]["tasks"] = 200
    data["questions"]["k4"]["questions"] = {"images": 64, "computed_fraction": 0.248}
    data["peers"]["runs"]["vllm/bf16"]["phases"]["q4"].update(
        {"photos": 48, "prompt_tokens_mean": 3330.0, "cached_prompt_tokens_mean": 2480.0})
    line = peers_report.work_lines(data)[-1]
    assert "1 question: Fovea 200 photos;" in line
    assert "4 questions: Fovea 64 photos, computed 24.8%; LMDeploy —; vLLM 48, computed 25.5%" in line
