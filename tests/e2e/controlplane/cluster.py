"""Start the control plane on loopback like a real cluster, and stop everything it started.

etcd; kube-apiserver with RBAC, real service-account tokens and the default admission plugins
(both webhook plugins, ServiceAccount, ValidatingAdmissionPolicy; MutatingAdmissionPolicy, beta
in 1.34, switched on); kube-controller-manager (Deployments make ReplicaSets make Pods; the
node-lifecycle controller is left out, since no kubelet keeps the nodes' Leases fresh) and
kube-scheduler. Each process logs to a file of its own in the work directory.
"""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.e2e.controlplane import pki

# No kubelet keeps node Leases fresh: without this the nodes are tainted unreachable and evicted.
CONTROLLERS = "*,-node-lifecycle-controller"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class StartError(RuntimeError):
    """A component did not come up; the message holds the tail of its log."""


@dataclass
class Process:
    name: str
    command: list[str]
    log: Path
    env: dict[str, str]
    popen: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        handle = self.log.open("ab")
        self.popen = subprocess.Popen(
            self.command, stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=self.env
        )
        handle.close()

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def tail(self, lines: int = 30) -> str:
        if not self.log.exists():
            return ""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def stop(self, grace: float = 10.0) -> None:
        if self.popen is None or self.popen.poll() is not None:
            return
        self.popen.terminate()
        try:
            self.popen.wait(grace)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()


def loopback_env() -> dict[str, str]:
    """The environment without proxies: everything here is on loopback."""
    env = {k: v for k, v in os.environ.items() if k.lower() not in ("http_proxy", "https_proxy", "all_proxy")}
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    return env


# Beta gates off by default that the suite turns on where the release has them: PodGroups and the
# claims they make for all their pods (scheduling.k8s.io/v1beta1, Kubernetes 1.37).
WORKLOAD_GATES = "GenericWorkload=true,DRAWorkloadResourceClaims=true"
WORKLOAD_API = "scheduling.k8s.io/v1beta1=true"


def minor(version: str) -> int:
    """37 of "v1.37.2"."""
    return int(version.lstrip("v").split(".")[1])


@dataclass
class ControlPlane:
    bin_dir: Path
    workdir: Path
    version: str = ""  # "v1.37.2": the gates and APIs the release has to turn on
    processes: list[Process] = field(default_factory=list)
    api_port: int = 0
    files: pki.Files | None = None

    @property
    def workloads(self) -> bool:
        """Whether PodGroups are served (turned on from 1.37, where they are beta)."""
        return bool(self.version) and minor(self.version) >= 37

    @property
    def _workload_api(self) -> list[str]:
        return [WORKLOAD_API] if self.workloads else []

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.api_port}"

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "admin.kubeconfig"

    @property
    def audit_log(self) -> Path:
        return self.workdir / "audit.log"

    def _audit_policy(self) -> Path:
        path = self.workdir / "audit-policy.yaml"
        path.write_text(
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n"
            "  - level: Metadata\n    resources: [{group: '', resources: [pods]}]\n    verbs: [create]\n"
            "  - level: None\n"
        )
        return path

    def binary(self, name: str) -> str:
        return str(self.bin_dir / name)

    # -- start and stop ---------------------------------------------------------------------------
    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.files = pki.make(self.workdir / "pki")
        self.api_port = free_port()
        etcd_port, peer_port = free_port(), free_port()
        self._write_kubeconfig()
        env = loopback_env()
        self._run(
            "etcd",
            [
                self.binary("etcd"),
                f"--data-dir={self.workdir / 'etcd'}",
                f"--listen-client-urls=http://127.0.0.1:{etcd_port}",
                f"--advertise-client-urls=http://127.0.0.1:{etcd_port}",
                f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-cluster=default=http://127.0.0.1:{peer_port}",
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
            env,
        )
        self._wait(lambda: self._etcd_healthy(etcd_port), "etcd", 60)
        files = self.files
        self._run(
            "kube-apiserver",
            [
                self.binary("kube-apiserver"),
                f"--etcd-servers=http://127.0.0.1:{etcd_port}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                # 1.37 refuses a loopback address for the `kubernetes` Service's endpoints; nothing
                # here reaches the API server through that Service.
                "--endpoint-reconciler-type=none",
                f"--secure-port={self.api_port}",
                f"--cert-dir={self.workdir / 'apiserver-certs'}",
                f"--tls-cert-file={files.serving_cert}",
                f"--tls-private-key-file={files.serving_key}",
                f"--client-ca-file={files.ca}",
                "--service-cluster-ip-range=10.0.0.0/24",
                "--service-account-issuer=https://kubernetes.default.svc",
                f"--service-account-key-file={files.service_account_key}",
                f"--service-account-signing-key-file={files.service_account_key}",
                "--authorization-mode=RBAC",
                "--allow-privileged=true",
                ",".join(
                    ["--feature-gates=MutatingAdmissionPolicy=true", *([WORKLOAD_GATES] if self.workloads else [])]
                ),
                ",".join(["--runtime-config=admissionregistration.k8s.io/v1beta1=true", *self._workload_api]),
                "--enable-admission-plugins=MutatingAdmissionPolicy",
                "--profiling=false",
                # Pods' audit events, where webhooks' auditAnnotations land (a key the API server
                # finds malformed is dropped there with only a log line).
                f"--audit-policy-file={self._audit_policy()}",
                f"--audit-log-path={self.audit_log}",
                "--audit-log-format=json",
            ],
            env,
        )
        self._wait(lambda: self._readyz(), "kube-apiserver", 120)
        common = [
            f"--kubeconfig={self.kubeconfig}",
            f"--authentication-kubeconfig={self.kubeconfig}",
            f"--authorization-kubeconfig={self.kubeconfig}",
            "--bind-address=127.0.0.1",
            "--leader-elect=false",
            *([f"--feature-gates={WORKLOAD_GATES}"] if self.workloads else []),
        ]
        self._run(
            "kube-controller-manager",
            [
                self.binary("kube-controller-manager"),
                *common,
                f"--secure-port={free_port()}",
                f"--controllers={CONTROLLERS}",
                f"--service-account-private-key-file={files.service_account_key}",
                f"--root-ca-file={files.ca}",
                "--use-service-account-credentials=false",
                f"--cert-dir={self.workdir / 'controller-manager-certs'}",
            ],
            env,
        )
        self._run(
            "kube-scheduler",
            [
                self.binary("kube-scheduler"),
                *common,
                f"--secure-port={free_port()}",
                f"--cert-dir={self.workdir / 'scheduler-certs'}",
            ],
            env,
        )
        # The controller-manager is ready for pods once the default ServiceAccount exists.
        self._wait(self._default_service_account, "kube-controller-manager (the default ServiceAccount)", 90)

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.stop()

    def _run(self, name: str, command: Sequence[str], env: dict[str, str]) -> Process:
        process = Process(name, list(command), self.workdir / f"{name}.log", env)
        process.start()
        self.processes.append(process)
        return process

    def _wait(self, ready: object, what: str, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            dead = [p for p in self.processes if not p.alive()]
            if dead:
                raise StartError(f"{dead[0].name} exited while waiting for {what}:\n{dead[0].tail()}")
            if ready():  # type: ignore[operator]
                return
            time.sleep(0.2)
        logs = "\n".join(f"--- {p.name}\n{p.tail(15)}" for p in self.processes)
        raise StartError(f"{what} not ready within {seconds:.0f} s\n{logs}")

    # -- readiness --------------------------------------------------------------------------------
    @staticmethod
    def _etcd_healthy(port: int) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as answer:
                return b'"true"' in answer.read()
        except OSError:
            return False

    def ssl_context(self) -> ssl.SSLContext:
        assert self.files is not None
        context = ssl.create_default_context(cafile=str(self.files.ca))
        context.load_cert_chain(str(self.files.admin_cert), str(self.files.admin_key))
        return context

    def get(self, path: str, timeout: float = 10) -> tuple[int, bytes]:
        """GET on the API server as the admin (`/metrics`, `/readyz`)."""
        request = urllib.request.Request(self.url + path)
        try:
            with urllib.request.urlopen(request, timeout=timeout, context=self.ssl_context()) as answer:
                return answer.status, answer.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()

    def _readyz(self) -> bool:
        try:
            return self.get("/readyz", timeout=3)[0] == 200
        except OSError:
            return False

    def _default_service_account(self) -> bool:
        try:
            return self.get("/api/v1/namespaces/default/serviceaccounts/default", timeout=3)[0] == 200
        except OSError:
            return False

    def _write_kubeconfig(self) -> None:
        assert self.files is not None
        self.kubeconfig.write_text(
            f"""apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster: {{server: "{self.url}", certificate-authority: "{self.files.ca}"}}
users:
- name: e2e-admin
  user: {{client-certificate: "{self.files.admin_cert}", client-key: "{self.files.admin_key}"}}
contexts:
- name: e2e
  context: {{cluster: e2e, user: e2e-admin}}
current-context: e2e
"""
        )
