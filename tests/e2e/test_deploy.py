"""The deploy recipes in deploy/, checked as far as this machine can.

- Kubernetes: every core object validates against the Kubernetes schema (strict: no
  unknown field) with kubernetes-validate, offline; a broken copy must fail, or the check
  proves nothing. KEDA's objects are custom resources, outside that schema: their fields
  are checked against KEDA's documented ones here.
- systemd: `systemd-analyze verify` accepts the unit, and its ExecStart command line runs
  a real worker that answers its health port and stops on the unit's KillSignal within
  TimeoutStopSec.
- Docker: no engine here, so the Dockerfile is parsed and read: the final stage installs
  no compiler, runs as a non-root user, starts tini in exec form.
- Every command line in them (manifest args, ExecStart, CMD) parses with the real CLI.
"""

from __future__ import annotations

import configparser
import copy
import io
import json
import shlex
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import click
import pytest
import yaml

from tasuki.cli.main import cli
from tasuki.testing.servers import free_port
from tasuki.web.security import check_bind
from tests.support.deps import need
from tests.support.processes import env_with_src
from tests.worker.helpers import wait_until

kubernetes_validate = need("kubernetes_validate")
dockerfile_parse = need("dockerfile_parse")

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S_VERSION = "1.30.0"  # the oldest Kubernetes still supported when these were written
COMPILERS = ("build-essential", "gcc", "g++", "clang", "make", "cargo", "rustc", "-dev")


def manifests() -> dict[str, list[dict[str, Any]]]:
    return {
        path.name: [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
        for path in sorted((DEPLOY / "kubernetes").glob("*.yaml"))
    }


def find(kind: str, name: str) -> dict[str, Any]:
    for docs in manifests().values():
        for doc in docs:
            if doc["kind"] == kind and doc["metadata"]["name"] == name:
                return doc
    raise AssertionError(f"no {kind} {name}")


def option(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def parse_cli(args: list[str]) -> dict[str, Any]:
    """`tasuki ARGS` parsed by the real command line, as the container would run it."""
    parent = click.Context(cli, info_name="tasuki")
    command = cli.get_command(parent, args[0])
    assert command is not None, args
    return command.make_context(args[0], list(args[1:]), parent=parent).params


# -- Kubernetes ----------------------------------------------------------------------
CORE = {"Deployment", "Service", "Secret", "PodDisruptionBudget"}


def validate_core(doc: dict[str, Any]) -> None:
    kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_core_objects_validate_against_the_kubernetes_schema() -> None:
    seen = set()
    for name, docs in manifests().items():
        for doc in docs:
            if doc["kind"] in CORE:
                validate_core(doc)
                seen.add(doc["kind"])
            else:
                assert doc["apiVersion"] == "keda.sh/v1alpha1", (name, doc["kind"])
    assert seen == CORE


@pytest.mark.parametrize(
    ("where", "value"),
    [
        (("spec", "template", "spec", "terminationGracePeriodSeconds"), "sixty"),
        (("spec", "replica"), 2),  # a typo: strict validation knows every field
        (("spec", "template", "spec", "containers", 0, "livenessProbe", "httpGet", "port"), []),
        (("spec", "template", "spec", "containers", 0, "resources", "limits", "memory"), {}),
    ],
)
def test_a_broken_manifest_fails_validation(where: tuple[Any, ...], value: Any) -> None:
    broken = copy.deepcopy(find("Deployment", "tasuki-worker"))
    node = broken
    for step in where[:-1]:
        node = node[step]
    node[where[-1]] = value
    with pytest.raises(kubernetes_validate.ValidationError):
        validate_core(broken)


def test_the_worker_deployment_fits_the_worker() -> None:
    deployment = find("Deployment", "tasuki-worker")
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    args = container["args"]
    params = parse_cli(args)
    # The pod outlives the grace: running jobs finish or are handed back before SIGKILL.
    assert pod["terminationGracePeriodSeconds"] >= params["grace"] + 30
    # Probes on the port the worker serves them on, from outside the pod.
    assert params["metrics_host"] == "0.0.0.0"
    [port] = [p for p in container["ports"] if p["containerPort"] == params["metrics_port"]]
    for probe, path in (
        ("startupProbe", "/livez"),
        ("livenessProbe", "/livez"),
        ("readinessProbe", "/readyz"),
    ):
        get = container[probe]["httpGet"]
        assert (get["path"], get["port"]) == (path, port["name"]), probe
    # A probe waits longer than the backend ping's own limit (2 s) before failing it.
    assert container["readinessProbe"]["timeoutSeconds"] > 2
    # A stuck loop is restarted: stuck-after, then the failures the probe tolerates.
    live = container["livenessProbe"]
    assert live["periodSeconds"] * live["failureThreshold"] >= params["stuck_after"]
    resources = container["resources"]
    assert {"cpu", "memory"} <= set(resources["requests"])
    assert "memory" in resources["limits"] and "cpu" not in resources["limits"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    assert container["env"][0]["valueFrom"]["secretKeyRef"]["key"] == "url"
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == str(params["metrics_port"])


def test_the_dashboard_is_behind_its_token() -> None:
    [container] = find("Deployment", "tasuki-dashboard")["spec"]["template"]["spec"]["containers"]
    params = parse_cli(container["args"])
    env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in container["env"]}
    assert env["TASUKI_DASHBOARD_TOKEN"] == {"name": "tasuki", "key": "dashboard-token"}
    assert check_bind(params["host"], token=None) is not None  # refused without it
    assert (
        check_bind(params["host"], token="a3f1c9e07b5d2846" * 3) is None
    )  # as openssl rand -hex 24
    service = find("Service", "tasuki-dashboard")
    assert service["spec"]["type"] == "ClusterIP"  # inside the cluster only
    secret = find("Secret", "tasuki")
    assert {"url", "dashboard-token"} <= set(secret["stringData"])


def check_keda(doc: dict[str, Any]) -> None:
    """The fields KEDA's CRDs declare (keda.sh/v1alpha1), and their types."""
    assert doc["apiVersion"] == "keda.sh/v1alpha1"
    assert doc["kind"] in {"ScaledObject", "TriggerAuthentication"}, doc["kind"]
    spec = doc["spec"]
    if doc["kind"] == "TriggerAuthentication":
        allowed = {"secretTargetRef", "env", "podIdentity", "hashiCorpVault", "configMapTargetRef"}
        assert set(spec) <= allowed and spec, spec
        for ref in spec.get("secretTargetRef", []):
            assert set(ref) == {"parameter", "name", "key"}, ref
        return
    allowed = {
        "scaleTargetRef", "minReplicaCount", "maxReplicaCount", "pollingInterval",
        "cooldownPeriod", "idleReplicaCount", "advanced", "triggers", "fallback",
        "initialCooldownPeriod",
    }  # fmt: skip
    assert set(spec) <= allowed, set(spec) - allowed
    assert isinstance(spec["scaleTargetRef"]["name"], str)
    for field in ("minReplicaCount", "maxReplicaCount", "pollingInterval", "cooldownPeriod"):
        assert isinstance(spec.get(field, 0), int) and not isinstance(spec.get(field), bool)
    assert spec["minReplicaCount"] <= spec["maxReplicaCount"]
    for trigger in spec["triggers"]:
        assert set(trigger) <= {"type", "metadata", "authenticationRef", "name", "metricType"}
        # Trigger metadata is a map of strings: a bare number is refused by the CRD.
        assert all(isinstance(v, str) for v in trigger["metadata"].values()), trigger


@pytest.mark.parametrize("name", ["keda-prometheus.yaml", "keda-postgresql.yaml", "keda-sqs.yaml"])
def test_keda_scales_the_worker_on_its_queue(name: str) -> None:
    docs = manifests()[name]
    for doc in docs:
        check_keda(doc)
    [scaled] = [d for d in docs if d["kind"] == "ScaledObject"]
    assert scaled["spec"]["scaleTargetRef"]["name"] == "tasuki-worker"
    [trigger] = scaled["spec"]["triggers"]
    meta = trigger["metadata"]
    worker_args = find("Deployment", "tasuki-worker")["spec"]["template"]["spec"]["containers"][0]
    concurrency = parse_cli(worker_args["args"])["concurrency"]
    target = {"prometheus": "threshold", "postgresql": "targetQueryValue"}
    assert int(meta[target.get(trigger["type"], "queueLength")]) == concurrency
    if trigger["type"] == "prometheus":
        # The gauge every worker reports for the whole queue: the largest, never the sum.
        assert "tasuki_queue_messages" in meta["query"] and meta["query"].startswith("max(")
        assert scaled["spec"]["minReplicaCount"] >= 1  # someone must report the depth
    else:
        assert "authenticationRef" in trigger
        auth = {d["metadata"]["name"] for d in docs if d["kind"] == "TriggerAuthentication"}
        assert trigger["authenticationRef"]["name"] in auth


def test_the_metric_keda_reads_is_the_one_workers_serve() -> None:
    from tasuki.core.capabilities import Capabilities
    from tasuki.middleware.metrics import QueueCollector

    class Stats:
        ready, in_flight, delayed, dead, oldest_ready_age = 3, 1, 0, 0, 0.0

    class Backend:
        capabilities = Capabilities(max_message_size=1 << 20)  # no pause: no paused gauge read

        def stats(self, queue: str) -> Stats:
            return Stats()

    families = {m.name: m for m in QueueCollector(Backend(), lambda: ["default"]).collect()}  # type: ignore[arg-type]
    states = {s.labels["state"] for s in families["tasuki_queue_messages"].samples}
    assert {"ready", "in_flight"} <= states


def test_the_postgresql_trigger_counts_what_stats_counts(postgres_server: Any) -> None:
    """The KEDA query, run on a real tasuki schema, gives ready + in flight."""
    import psycopg

    import tasuki

    schema = f"keda_{uuid.uuid4().hex[:12]}"
    url = postgres_server.url(schema)
    app = tasuki.App(url)
    for n in range(3):
        app.send("default", b"{}", delay=None if n else 3600.0)  # one delayed
    app.send("default", b"{}")
    app.backend.lease("default", 1, 30.0)  # one in flight
    stats = app.stats("default")
    [scaled] = [d for d in manifests()["keda-postgresql.yaml"] if d["kind"] == "ScaledObject"]
    query = scaled["spec"]["triggers"][0]["metadata"]["query"].replace("tasuki.", f"{schema}.")
    dsn = url.split("?", 1)[0]
    with psycopg.connect(dsn) as conn:
        [(count,)] = conn.execute(query).fetchall()
    assert count == stats["ready"] + stats["in_flight"] == 3
    app.close()


# -- systemd ---------------------------------------------------------------------------
UNIT = DEPLOY / "systemd" / "tasuki-worker.service"


def unit() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(UNIT.read_text())
    return parser


def exec_start() -> list[str]:
    return shlex.split(unit()["Service"]["ExecStart"])


def test_the_unit_stops_the_worker_gracefully() -> None:
    service = unit()["Service"]
    params = parse_cli(exec_start()[1:])
    assert service["KillSignal"] == "SIGTERM"
    assert service["KillMode"] == "mixed"  # the worker stops its own children
    assert int(service["TimeoutStopSec"]) >= params["grace"] + 30
    assert service["User"] != "root"


def verify(text: str, tmp_path: Path) -> str:
    copy_ = tmp_path / "tasuki-worker.service"
    # The unit names where the app will be installed; the check needs a binary that exists.
    copy_.write_text(text.replace(exec_start()[0], shutil.which("tasuki") or sys.executable))
    result = subprocess.run(
        ["systemd-analyze", "verify", str(copy_)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return (result.stdout + result.stderr).strip() + ("" if result.returncode == 0 else " (failed)")


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze here")
def test_systemd_accepts_the_unit(tmp_path: Path) -> None:
    assert verify(UNIT.read_text(), tmp_path) == ""
    broken = UNIT.read_text().replace("KillSignal=SIGTERM", "KillSignal=SIGTERMINATE")
    assert "SIGTERMINATE" in verify(broken.replace("TimeoutStopSec=", "TimeoutStopSecs="), tmp_path)


def test_the_units_command_line_runs_a_worker(tmp_path: Path) -> None:
    """ExecStart as written (the app is the docs' examples/myapp.py), on SQLite, then the
    unit's KillSignal: the worker answers its health port and exits 0 in time."""
    argv = exec_start()
    params = parse_cli(argv[1:])
    env = {**env_with_src(), "TASUKI_URL": f"sqlite:///{tmp_path / 'myapp.db'}"}
    port = params["health_port"]
    if not _port_free(port):  # the unit's port is taken on this machine: use another
        port = free_port()
        argv[argv.index("--health-port") + 1] = str(port)
    proc = subprocess.Popen(
        [sys.executable, "-m", "tasuki", *argv[1:]],
        cwd=ROOT / "examples",
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_until(lambda: _answers(port) or proc.poll() is not None, timeout=30)
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/livez", timeout=5) as resp:
            assert resp.status == 200 and json.loads(resp.read())["ok"]
        stop = getattr(signal, unit()["Service"]["KillSignal"])
        started = time.monotonic()
        proc.send_signal(stop)
        assert proc.wait(int(unit()["Service"]["TimeoutStopSec"])) == 0
        assert time.monotonic() - started < params["grace"]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        assert proc.stderr is not None
        err = proc.stderr.read().decode()
        proc.stderr.close()
    events = [json.loads(line)["event"] for line in err.splitlines() if line.startswith("{")]
    if params["workers"] > 1:  # every worker stopped, then the supervisor said so
        assert sum(e.startswith("worker stopped") for e in events) == params["workers"], events
        assert events[-1] == "all workers stopped; exiting with status 0"
    else:
        assert events[-1].startswith("worker stopped")  # --log-format json


def _answers(port: int) -> bool:
    """Ready: with --workers, every worker has started (/livez answers before)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1):
            return True
    except OSError:
        return False


def _port_free(port: int) -> bool:
    import socket

    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


# -- Docker ----------------------------------------------------------------------------
DOCKERFILE = DEPLOY / "docker" / "Dockerfile"


def final_stage(text: str) -> list[dict[str, Any]]:
    # From memory: given no file object, the parser reads and writes ./Dockerfile.
    parsed = dockerfile_parse.DockerfileParser(fileobj=io.BytesIO(text.encode()))
    instructions = [i for i in parsed.structure if i["instruction"] != "COMMENT"]
    last_from = max(n for n, i in enumerate(instructions) if i["instruction"] == "FROM")
    return instructions[last_from:]


def lint(text: str) -> list[str]:
    """What the Dockerfile's final stage must hold to, as far as reading it can tell."""
    stage = final_stage(text)
    problems = []
    by = {i["instruction"]: i["value"] for i in stage}  # the last of each kind
    for i in stage:
        if i["instruction"] == "RUN" and any(c in i["value"] for c in COMPILERS):
            problems.append(f"build tools in the final stage: {i['value']}")
    user = by.get("USER", "root").split(":")[0]
    if user in {"root", "0"}:
        problems.append(f"runs as root ({user})")
    try:
        entrypoint = json.loads(by.get("ENTRYPOINT", ""))
    except json.JSONDecodeError:
        problems.append(f"ENTRYPOINT not in exec form: {by.get('ENTRYPOINT')!r}")
    else:
        if entrypoint[:2] != ["tini", "--"] or entrypoint[2:] != ["tasuki"]:
            problems.append(f"ENTRYPOINT is not tini -- tasuki: {entrypoint}")
    if by.get("STOPSIGNAL", "SIGTERM") != "SIGTERM":
        problems.append(f"STOPSIGNAL {by['STOPSIGNAL']}")
    if not any("--from=" in i["value"] for i in stage if i["instruction"] == "COPY"):
        problems.append("nothing copied from the build stage")
    return problems


def test_the_dockerfile_final_stage() -> None:
    text = DOCKERFILE.read_text()
    assert lint(text) == []
    stage = final_stage(text)
    cmd = json.loads(next(i["value"] for i in stage if i["instruction"] == "CMD"))
    params = parse_cli(cmd)
    assert params["metrics_host"] == "0.0.0.0"
    expose = next(i["value"] for i in stage if i["instruction"] == "EXPOSE")
    assert expose == str(params["metrics_port"])
    # The build stage is where the compilers went.
    assert "build-essential" in text.split("AS run")[0]


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (("USER 10001:10001", "USER root"), "runs as root"),
        (('ENTRYPOINT ["tini", "--", "tasuki"]', "ENTRYPOINT tasuki"), "exec form"),
        (('ENTRYPOINT ["tini", "--", "tasuki"]', 'ENTRYPOINT ["tasuki"]'), "not tini"),
        (("install -y --no-install-recommends tini", "install -y gcc tini"), "build tools"),
        (("USER 10001:10001\n", ""), "runs as root"),
    ],
)
def test_the_dockerfile_lint_catches_a_broken_one(change: tuple[str, str], problem: str) -> None:
    text = DOCKERFILE.read_text()
    assert text.count(change[0]) == 1
    broken = text.replace(*change)
    assert any(problem in p for p in lint(broken)), lint(broken)
