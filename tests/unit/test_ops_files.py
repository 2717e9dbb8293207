"""The alert rules and the Grafana dashboard in docs/ name metrics tasuki exports."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry

import tasuki
from tasuki.middleware.metrics import Metrics, QueueCollector

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "docs" / "prometheus" / "tasuki-rules.yml"
DASHBOARD = ROOT / "docs" / "grafana" / "tasuki-dashboard.json"
METRIC = re.compile(r"\b(tasuki_[a-z_]+)\b")


def exported() -> set[str]:
    """Every series name the Metrics middleware and the queue collector can export."""
    app = tasuki.App("memory://")
    app.backend.enqueue([tasuki.backends.base.Envelope("q", "m", b"{}")])
    registry = CollectorRegistry()
    Metrics(registry)
    registry.register(QueueCollector(app.backend, queues=lambda: ["q"]))
    names = set()
    for family in registry.collect():
        names.add(family.name)
        if family.type == "counter":
            names.add(family.name + "_total")
        if family.type == "histogram":
            names |= {family.name + s for s in ("_bucket", "_sum", "_count")}
    app.close()
    return names


def test_alert_rules_name_exported_metrics() -> None:
    doc = yaml.safe_load(RULES.read_text())
    rules = [rule for group in doc["groups"] for rule in group["rules"]]
    alerts = {rule["alert"] for rule in rules if "alert" in rule}
    assert {
        "TasukiFailureRateHigh",
        "TasukiOldestReadyMessageTooOld",
        "TasukiDeadLettersGrowing",
        "TasukiLeasesLost",
    } <= alerts
    known = exported()
    for rule in rules:
        used = set(METRIC.findall(rule["expr"]))
        assert used, rule
        assert used <= known, (rule.get("alert") or rule.get("record"), used - known)
        if "alert" in rule:
            assert rule["annotations"]["summary"] and rule["labels"]["severity"]


def test_promtool_accepts_the_rules() -> None:
    promtool = shutil.which("promtool")
    if promtool is None:  # the YAML test above still checks names and shape
        pytest.skip("promtool is not installed (Debian: apt-get install prometheus)")
    result = subprocess.run(
        [promtool, "check", "rules", str(RULES)],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_grafana_dashboard_queries_exported_metrics() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    known = exported()
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    assert len(exprs) >= 10
    used = {name for expr in exprs for name in METRIC.findall(expr)}
    assert used <= known, used - known
    # the reliability metrics each have a panel
    for name in ("leases_lost", "heartbeat_lag", "lease_expiry_to_start", "queue_messages"):
        assert any(name in expr for expr in exprs), name
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])
