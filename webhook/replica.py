"""One replica wired together: its policy sources, its view of the cluster, its certificates and
the server (`gpu-admission serve`: the webhook under gunicorn over TLS, on the embedded default
if asked nothing).

The same ServerConfig comes from the command line (`serve`) or from the environment (the WSGI
module a container's gunicorn loads), so both run the same way.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from certs.cert_files import CA_FILE, ensure_dev_certificates
from policies import COMPILED
from webhook import logs
from webhook.cluster.api import identity
from webhook.environment import DEFAULT_CERT_DIR, ServerConfig, use
from webhook.events import SourceProblems
from webhook.serving import background
from webhook.serving.server import WebhookServer
from webhook.sources.directories import DirectoryWatcher
from webhook.sources.policy_files import bundled_texts
from webhook.sources.store import PolicyStore
from webhook.state import AdmissionSettings, EngineHolder

log = logging.getLogger("gpu_admission.server")
__all__ = ["DEFAULT_CERT_DIR", "ServerConfig", "build_app", "prepare_certificates", "serve"]


def build_holder(config: ServerConfig) -> EngineHolder:
    """The engine holder and its policy sources: bundled, directories (reloaded) or ConfigMaps (watched)."""
    namespaced = "all" if config.all_namespaces else "labelled" if config.labelled_namespaces else ""
    settings = AdmissionSettings(config.fail_open, config.watch_namespace, namespaced)
    if config.watch_namespace:
        return _connected_holder(config, settings)
    holder = EngineHolder(settings)
    store = _store(holder)
    if config.policy_dirs:
        directories = DirectoryWatcher(list(config.policy_dirs), store)
        holder.sources.append(directories)
        directories.check_once(settle=False)
        background.register(directories.start)
    else:
        store.update("bundled", tuple(bundled_texts()))
    return holder


def _store(holder: EngineHolder) -> PolicyStore:
    """The policy store swapping engines into `holder`, its load errors counted."""
    from webhook.metrics import LOAD_ERRORS

    def count(loaded: SourceProblems) -> None:
        LOAD_ERRORS.inc(len(loaded.problems))
        holder.load_errors += len(loaded.problems)

    holder.events.subscribe(SourceProblems, count)
    return PolicyStore(holder.swap, holder.events)


def _connected_holder(config: ServerConfig, settings: AdmissionSettings) -> EngineHolder:
    """A replica connected to its cluster, built whole here, before gunicorn forks (nothing
    built makes a request or a thread), and started in the worker, after it: the holder's view
    over the cluster's link, the policy store, and the watches and background parts
    (webhook.cluster.wiring.ConnectedReplica), stopped on the worker's way out."""
    from webhook.cluster.wiring import ConnectedReplica, cluster_link

    identity.load_config()
    name = config.replica_name
    api = identity.api_client(identity=name)
    link = cluster_link(api, config.watch_namespace, name, strict_shares=config.strict_shares)
    holder = EngineHolder(settings, link=link)
    connected = ConnectedReplica(
        holder.view,
        _store(holder),
        config.watch_namespace,
        api,
        name,
        all_namespaces=config.all_namespaces,
        labelled_namespaces=config.labelled_namespaces,
        audit_every=config.audit_seconds or None,
    )
    holder.gates.append(connected.not_ready)  # ready once every watch has listed, and while none has stopped
    background.register(connected.start)
    background.on_exit(connected.stop)
    return holder


def prepare_certificates(config: ServerConfig) -> None:
    """Certificate files before serving: made in the cluster (self-managed: the Secrets, the Lease,
    kept renewed by a thread in the worker) or, outside one, dev certificates on first start."""
    if not config.manage_certs:
        if ensure_dev_certificates(config.cert_dir):
            log.info("dev certificates made", extra={"fields": {"ca": str(config.cert_dir / CA_FILE)}})
        return
    if not config.watch_namespace:
        raise SystemExit("self-managed certificates need the webhook's namespace (--watch-configmaps)")
    identity.load_config()
    missing = _cert_manager(config).ensure_files()
    if missing:
        raise SystemExit(f"not serving after 120 s: {missing}")
    background.register(lambda: _renew_in_background(config))


def _cert_manager(config: ServerConfig) -> Any:
    from certs.manager import CertManager

    # One identity for the master's bootstrap and the worker's renewals (the name was resolved as
    # the settings were read, in the master): the worker keeps the Lease the bootstrap took, and
    # mends an emptied caBundle at its first pass.
    return CertManager(
        identity.api_client(identity=config.replica_name),
        config.watch_namespace,
        config.service,
        config.replica_name,
        config.cert_dir,
        extra_names=config.serving_names,
    )


_renewing: list[Any] = []  # the worker's CertManager, whose `trust` readiness waits on


def certificate_trusted() -> str:
    """A readiness gate: why the API server would refuse this replica's certificate now ("" if it
    would not), so the Service never sends a review to a replica it cannot verify."""
    from certs.manager import UNTRUSTED

    return UNTRUSTED if _renewing and _renewing[0].trust is False else ""


def _renew_in_background(config: ServerConfig) -> None:
    manager = _cert_manager(config)
    _renewing[:] = [manager]
    stop = threading.Event()
    thread = threading.Thread(target=manager.run, args=(stop, config.cert_sync_seconds), name="certs", daemon=True)
    thread.start()

    def stopped() -> None:
        stop.set()
        thread.join(10)

    background.on_exit(stopped)


def build_app(config: ServerConfig) -> Any:
    """The Flask app of a replica, and /metrics on its own port where one is configured (started
    with the worker's other background work)."""
    from webhook.metrics import exposition
    from webhook.serving.app import create_app
    from webhook.serving.metrics_port import serve_metrics

    holder = build_holder(config)
    if config.manage_certs:
        holder.gates.append(certificate_trusted)
    if config.metrics_bind:
        stops: list[Callable[[], None]] = []

        def render() -> bytes:
            return exposition(holder.quota_metrics())

        def stop_all() -> None:
            for stop in stops:
                stop()

        background.register(lambda: stops.append(serve_metrics(config.metrics_bind, render)))
        background.on_exit(stop_all)
    return create_app(holder, metrics_here=not config.metrics_bind)


def serve(config: ServerConfig) -> None:
    use(config)  # the worker gunicorn forks inherits it
    logs.configure(config.log_level)  # as the WSGI entry point does
    prepare_certificates(config)
    app = build_app(config)
    ca = str(config.cert_dir / CA_FILE)
    client_ca = str(config.client_ca) if config.client_ca else None
    fields = {
        "bind": config.bind,
        "ca": ca,
        "threads": config.threads,
        "clientCa": client_ca,
        "engineCompiled": COMPILED,
    }
    log.info("serving", extra={"fields": fields})
    options = {
        "bind": config.bind,
        "threads": config.threads,
        "certfile": str(config.cert),
        "keyfile": str(config.key),
        "ca_certs": client_ca,
    }
    WebhookServer(app, options).run()
