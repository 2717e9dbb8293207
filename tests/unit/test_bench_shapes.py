"""`./dev bench shapes`: the sweep is the same grid for tasuki as for the peers, and the
table keeps each system's best configuration and divides tasuki's best by it."""

from __future__ import annotations

import subprocess
from typing import Any

from benchmarks import shape_jobs, shapes_report
from benchmarks.shape_peers import SYSTEMS, configs, spawn


def test_tasuki_gets_the_grid_the_peers_get_and_no_more() -> None:
    grid = {(c.procs, c.conc) for c in configs("tasuki")}
    assert grid == {(1, 8), (1, 32), (2, 8), (2, 32)}
    for system in SYSTEMS:
        assert grid <= {(c.procs, c.conc) for c in configs(system)}, system
        assert len(configs(system)) <= len(grid) + 1, system


def test_spawn_runs_n_copies_in_one_shell() -> None:
    assert spawn(1, ["echo", "hi"]) == ["echo", "hi"]
    out = subprocess.run(spawn(3, ["echo", "hi"]), capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["hi"] * 3


def test_the_cpu_shape_spins_and_marks(monkeypatch: Any) -> None:
    seen: list[int] = []
    monkeypatch.setattr(shape_jobs, "mark", seen.append)
    monkeypatch.setattr(shape_jobs, "_shape", "cpu")
    monkeypatch.setattr(shape_jobs, "_steps", 10)
    shape_jobs.run(7)
    assert seen == [7]


def row(system: str, config: str, shape: str, per_s: float | None) -> dict[str, Any]:
    if per_s is None:
        return {"system": system, "config": config, "shape": shape, "error": "Boom: x"}
    return {"system": system, "config": config, "shape": shape, "steady_per_s": per_s}


def test_the_table_names_each_best_configuration_and_the_ratio() -> None:
    rows = [
        row("tasuki", "--workers 1 -c 8", "redis", 4_000.0),
        row("tasuki", "--workers 2 -c 8", "redis", 9_000.0),
        row("dramatiq", "--processes 2 --threads 8", "redis", 3_000.0),
        row("dramatiq", "--processes 1 --threads 8", "redis", None),
        row("huey", "-k process -w 2", "redis", 2_000.0),
        row("raw", "2 x one thread", "redis", 10_000.0),
    ]
    text = "\n".join(shapes_report.shape_table(rows, "redis"))
    assert "| dramatiq | --processes 2 --threads 8 | 3,000 | 3.00x |" in text
    assert "| raw floor | 2 x one thread | 10,000 | 0.90x |" in text
    assert "**3.00x** (target 3x: met)" in text
    assert "**90%** (target 70 %: met)" in text
    matrix = "\n".join(shapes_report.matrix(rows, ["redis"]))
    assert "| dramatiq | --processes 1 --threads 8 | failed |" in matrix


def test_the_cpu_shape_compares_two_processes_with_twice_one() -> None:
    rows = [
        row("tasuki", "--workers 1 -c 8", "cpu", 900.0),
        row("tasuki", "--workers 2 -c 8", "cpu", 1_530.0),
        row("celery", "--pool=prefork -c 2", "cpu", 1_600.0),
    ]
    text = "\n".join(shapes_report.shape_table(rows, "cpu"))
    assert "**85%** (target: within 10 %, missed)" in text
    assert "missed by 3.14x" in text


def test_the_postgres_shape_sweeps_the_same_grid() -> None:
    from benchmarks import shape_pg

    grid = {(c.procs, c.conc) for c in shape_pg.configs("tasuki")}
    assert grid == {(1, 8), (1, 32), (2, 8), (2, 32)}
    for system in shape_pg.SYSTEMS:
        assert {(c.procs, c.conc) for c in shape_pg.configs(system)} == grid, system


def test_each_configuration_keeps_its_median_round_and_every_rate() -> None:
    from benchmarks.shapes import median_rows

    runs = [
        row("tasuki", "-c 8", "redis", 900.0),
        row("huey", "-w 2", "redis", None),
        row("tasuki", "-c 8", "redis", 5_000.0),
        row("huey", "-w 2", "redis", 700.0),
        row("tasuki", "-c 8", "redis", 1_000.0),
        row("dramatiq", "x", "redis", None),
    ]
    got = {r["system"]: r for r in median_rows(runs)}
    assert got["tasuki"]["steady_per_s"] == 1_000.0  # not the lucky 5,000
    assert got["tasuki"]["rounds_per_s"] == [900, 5_000, 1_000]
    assert (got["huey"]["steady_per_s"], got["huey"]["rounds_failed"]) == (700.0, 1)
    assert "error" in got["dramatiq"]


def test_the_middle_rate_leaves_out_a_slow_start_and_a_slow_tail() -> None:
    from benchmarks.measure import mid_rate

    starts = [0.0] + [1.0 + k / 100 for k in range(99)] + [10.0]  # 100 jobs/s between
    assert 95 < mid_rate(starts) < 105


def test_the_io_shape_sweeps_the_concurrency_io_jobs_run_at() -> None:
    from benchmarks.shape_peers import io_configs

    labels = {s: [c.label for c in io_configs(s)] for s in SYSTEMS}
    assert set(labels["tasuki"]) == {
        "--workers 1 -c 256",
        "--workers 2 -c 256",
        "--workers 1 -c 1024, async def",
        "--workers 2 -c 1024, async def",
    }
    assert labels["dramatiq"] == ["--processes 2 --threads 256"]
    assert set(labels["huey"]) == {"-k thread -w 256", "-k greenlet -w 1024"}
    assert set(labels["celery"]) == {"--pool=threads -c 256", "--pool=gevent -c 1024"}
    for system in ("arq", "saq", "taskiq"):
        assert {(c.procs, c.conc) for c in io_configs(system)} == {
            (p, c) for p in (1, 2) for c in (256, 1024)
        }, system
    for system in SYSTEMS:
        for c in io_configs(system):
            # redis-py's default pool of 100 stalls or fails past it: every peer sets its own
            assert system == "tasuki" or c.pool > c.conc, c


def test_each_io_drain_is_about_8_seconds_of_its_ideal() -> None:
    from benchmarks.shape_peers import Config, io_ideal, io_messages

    one = Config("dramatiq", "x", 1, 256)
    two = Config("tasuki", "y", 2, 1024, "async")
    assert (io_ideal(one), io_ideal(two)) == (5_120.0, 40_960.0)
    assert io_messages(one) == 41_000
    assert io_messages(two) == 328_000


def test_the_io_shape_waits_50_ms(monkeypatch: Any) -> None:
    import asyncio

    seen: list[Any] = []
    monkeypatch.setattr(shape_jobs, "mark", seen.append)
    monkeypatch.setattr(shape_jobs, "_shape", "io50")
    monkeypatch.setattr(shape_jobs.time, "sleep", seen.append)
    shape_jobs.run(3)
    assert seen == [0.05, 3]

    async def fake(seconds: float) -> None:
        seen.append(seconds)

    monkeypatch.setattr(asyncio, "sleep", fake)
    asyncio.run(shape_jobs.arun(4))
    assert seen[2:] == [0.05, 4]


def test_io50_runs_only_when_named() -> None:
    from benchmarks.shapes import parse, plan

    assert "io50" not in plan(parse([]))
    todo = plan(parse(["--shapes", "io50", "--quick", "--only", "tasuki,huey"]))
    cfgs = todo["io50"][0]
    assert [c.system for c in cfgs] == ["tasuki", "huey"]  # one each when quick
    assert all(c.conc >= 256 for c in cfgs)
    try:
        plan(parse(["--shapes", "io5"]))
    except SystemExit as exc:
        assert "io5" in str(exc)
    else:
        raise AssertionError("an unknown shape ran")


def test_the_io_table_gives_each_rate_as_a_share_of_its_ideal() -> None:
    rows = [
        {**row("tasuki", "--workers 1 -c 256", "io50", 4_096.0), "ideal_per_s": 5_120.0,
         "pool": 0, "drained": 41_000, "startup_s": 0.3, "tail_s": 0.1},
        {**row("huey", "-k thread -w 256", "io50", None), "ideal_per_s": 5_120.0, "pool": 272},
        row("tasuki", "--workers 1 -c 8", "redis", 4_000.0),
    ]  # fmt: skip
    text = "\n".join(shapes_report.io_table(rows))
    ours = "| tasuki | --workers 1 -c 256 | default | 41,000 | 4,096 | 5,120 | 80% | 0.30 | 1% |"
    assert ours in text
    assert "| huey | -k thread -w 256 | 272 | — | failed | 5,120 |" in text
    assert "-c 8" not in text
