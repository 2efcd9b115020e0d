# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The converge benchmark's arithmetic: seconds per added node and the verdict on each target."""

from __future__ import annotations

import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
SPEC = importlib.util.spec_from_file_location("bench_converge", ROOT / "tests" / "bench" / "bench_converge.py")
bench = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(bench)


def test_slope_is_the_least_squares_seconds_per_added_node():
    assert bench.slope([(3, 4.0), (9, 5.2), (17, 6.8)]) == 0.2
    # Noise at one size moves the slope, it does not break it.
    assert bench.slope([(3, 5.1), (9, 4.6), (17, 6.5)]) == 0.107
    assert bench.slope([(3, 4.0)]) is None
    assert bench.slope([(3, 4.0), (3, 5.0)]) is None


def report(federated_cold=50.5, per_node_noop=0.25):
    return {"cases": [{"case": "federated5-ssh", "cold_s": federated_cold, "noop_s": 8.7},
                      {"case": "single3", "cold_s": 31.4, "noop_s": 4.1}],
            "per_added_compute_node": {"cold_s": 7.54, "noop_s": per_node_noop}}


def test_each_target_measured_gets_its_figure_and_verdict():
    found = {v["target"]: v for v in bench.verdicts(report())}
    assert found["federated lab cold"] == {"target": "federated lab cold", "seconds": 50.5, "at_most": 60.0,
                                           "met": True}
    assert found["federated lab no-op"] == {"target": "federated lab no-op", "seconds": 8.7, "at_most": 10.0,
                                            "met": True}
    # At the limit is within it; above is not.
    assert found["per added node no-op"]["met"]
    # A case or slope the run did not measure has no verdict, nor a relative target without its reference.
    assert not any("compute image" in target for target in found)
    assert not any("cold, 1.3x" in target or "galaxy" in target for target in found)
    assert not {v["target"]: v for v in bench.verdicts(report(federated_cold=60.1, per_node_noop=0.26))}[
        "federated lab cold"]["met"]
    assert not {v["target"]: v for v in bench.verdicts(report(per_node_noop=0.26))}["per added node no-op"]["met"]


def test_the_table_says_which_targets_are_not_met():
    shown = {"connection": "ssh", "slurm_hosts": 6, "noop_controller_cpu_s": 5.7, "noop_hosts_cpu_s": 5.5,
             "noop_tasks": 127, "noop_top_tasks": []}
    measured = dict(report(), cases=[dict(case, **shown) for case in report()["cases"]])
    measured["per_added_compute_node"].update(cold_controller_cpu_s=0.8, cold_hosts_cpu_s=13.6,
                                              noop_controller_cpu_s=0.11, noop_hosts_cpu_s=0.05)
    measured["apt_floor"] = bench.floor_summary([7.02], [6.9], 2)
    measured["targets"] = bench.verdicts(measured)
    text = bench.table(measured)
    assert "target per added node cold, 1.3x apt's own floor: 7.54 s, at most 4.563 s: NOT met" in text
    assert "target federated lab no-op: 8.7 s, at most 10.0 s: met" in text
    measured["cases"][0]["reference_cpu_s"] = [0.22, 0.31]
    assert "(reference loop cpu s: 0.22 0.31)" in bench.table(measured)


def test_a_longer_reference_loop_takes_more_cpu_time():
    short, long = bench.reference_cpu_seconds(50_000), bench.reference_cpu_seconds(2_000_000)
    assert 0 <= short < long


def sized(case, computes, noop_runs_s):
    return {"case": case, "slurm_hosts": computes + 1, "cold_s": 10.0 + computes, "noop_s": sorted(noop_runs_s)[1],
            "noop_runs_s": noop_runs_s, "cold_controller_cpu_s": 1.0, "cold_hosts_cpu_s": 2.0,
            "noop_controller_cpu_s": 1.0, "noop_hosts_cpu_s": 1.0}


def test_no_op_per_added_node_pairs_the_runs_of_one_round():
    # Round k's slope is over each size's no-op k (runs taken at the same machine speed); the per-node figure
    # is the median round's. Each size's median run here is its round 3, 17 nodes' slow one: their slope is
    # round 3's, reported beside.
    per_node = bench.per_added_node([sized("scale3", 3, [4.0, 5.2, 4.1]),
                                     sized("scale9", 9, [5.2, 6.4, 5.3]),
                                     sized("scale17", 17, [5.7, 8.0, 7.4])])
    assert per_node["noop_s_rounds"] == [0.118, 0.2, 0.237]
    assert per_node["noop_s"] == 0.2
    assert per_node["noop_s_of_medians"] == 0.237
    assert per_node["cold_s"] == 1.0
    assert bench.per_added_node([sized("scale3", 3, [4.0, 5.2, 4.1])]) is None


def test_the_sizes_of_one_kind_share_a_series():
    assert {bench.series(c) for c in ("scale3", "scale9", "scale17")} == {"scale"}
    assert {bench.series(c) for c in ("imaged3", "imaged17")} == {"imaged"}
    assert [bench.series(c) for c in ("single3", "federated5-ssh", "federated5-docker")] == [
        "3-host", "federated5-ssh", "federated5-docker"]


def test_the_three_host_no_op_is_held_to_half_of_galaxyproject_slurm_in_the_same_run():
    measured = report()
    measured["cases"].append({"case": "galaxy3", "cold_s": 207.7, "noop_s": 8.9})
    found = {v["target"]: v for v in bench.verdicts(measured)}
    assert found["3-host cluster no-op, half of galaxyproject.slurm's"] == {
        "target": "3-host cluster no-op, half of galaxyproject.slurm's", "seconds": 4.1, "at_most": 4.45, "met": True}
    assert found["3-host cluster cold, a fifth of galaxyproject.slurm's"] == {
        "target": "3-host cluster cold, a fifth of galaxyproject.slurm's", "seconds": 31.4, "at_most": 41.54,
        "met": True}
    measured["cases"][-1].update(noop_s=8.1, cold_s=150.0)
    found = {v["target"]: v for v in bench.verdicts(measured)}
    assert not found["3-host cluster no-op, half of galaxyproject.slurm's"]["met"]
    assert not found["3-host cluster cold, a fifth of galaxyproject.slurm's"]["met"]
    # Without the comparator in the run, no verdict on it.
    assert not any("galaxy" in v["target"] for v in bench.verdicts(report()))
    assert bench.series("galaxy3") == bench.series("single3")


def test_the_apt_floor_is_the_lowest_run_of_apt_alone_over_the_cores():
    floor = bench.floor_summary([7.86, 7.02], [7.67, 6.9], 2)
    assert floor == {"cpu_s_runs": [7.86, 7.02], "wall_s_runs": [7.67, 6.9], "cpu_s": 7.02, "cpus": 2,
                     "per_node_s": 3.51}
    assert bench.floor_summary([7.02], [6.9], 8)["per_node_s"] == 0.877


def test_the_cold_apt_target_is_held_to_1_3_times_apt_alone_in_the_same_run():
    measured = dict(report(), apt_floor=bench.floor_summary([7.02], [6.9], 2))
    found = {v["target"]: v for v in bench.verdicts(measured)}
    assert found["per added node cold, 1.3x apt's own floor"] == {
        "target": "per added node cold, 1.3x apt's own floor", "seconds": 7.54, "at_most": 4.563, "met": False}
    # A slower machine's apt takes longer, and the target with it.
    assert {v["target"]: v for v in bench.verdicts(dict(report(), apt_floor=bench.floor_summary([12.0], [12.0], 2)))}[
        "per added node cold, 1.3x apt's own floor"]["met"]
    shown = {"connection": "ssh", "slurm_hosts": 6, "noop_controller_cpu_s": 5.7, "noop_hosts_cpu_s": 5.5,
             "noop_tasks": 127, "noop_top_tasks": []}
    measured["cases"] = [dict(case, **shown) for case in measured["cases"]]
    measured["per_added_compute_node"].update(cold_controller_cpu_s=0.8, cold_hosts_cpu_s=13.6,
                                              noop_controller_cpu_s=0.11, noop_hosts_cpu_s=0.05)
    measured["targets"] = bench.verdicts(measured)
    text = bench.table(measured)
    assert "apt alone on a fresh compute node (install-packages.sh): 7.02 s of CPU (runs 7.02; wall 6.9 s)," in text


def test_cold_per_added_node_is_the_median_of_the_cold_rounds():
    # Each size's cold run k is on fresh containers in round k; the per-node figure is the median round's slope,
    # not the slope over each size's median run (those may come from different rounds).
    cases = [dict(sized("imaged3", 3, [4.0, 5.2, 4.1]), cold_runs_s=[14.6, 13.7, 13.9]),
             dict(sized("imaged9", 9, [5.2, 6.4, 5.3]), cold_runs_s=[19.0, 18.3, 20.3]),
             dict(sized("imaged17", 17, [5.7, 8.0, 7.4]), cold_runs_s=[29.7, 25.8, 27.9])]
    for case in cases:
        case["cold_s"] = sorted(case["cold_runs_s"])[1]
    per_node = bench.per_added_node(cases)
    assert per_node["cold_s_rounds"] == [1.093, 0.868, 0.997]
    assert per_node["cold_s"] == 0.997
    assert per_node["cold_s_of_medians"] == 1.006
    # The no-op figures are as before.
    assert per_node["noop_s"] == 0.2
