"""Who a replica is to the API server: its name (the holder of its Leases, the reporting
instance of its Events) in the User-Agent of every request it makes, so the API server's audit
log tells replicas apart; and where the API server is.

The name is a setting (webhook.environment.ServerConfig.replica, resolved once as the settings
are read, in gunicorn's master before the worker is forked), passed in: the master (which
bootstraps the certificates) and the worker (which keeps them renewed) are one identity, so the
worker renews the Lease the bootstrap took instead of waiting out its duration.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version

from kubernetes import client, config

from webhook.environment import kubeconfig as environment_kubeconfig
from webhook.environment import process_name


def _version() -> str:
    """The installed package's (pyproject.toml is the one place a version is written)."""
    try:
        return version("gpu-admission")
    except PackageNotFoundError:
        return "unknown"


VERSION = _version()


# Each watch holds a connection for as long as it runs (ten of them: configmaps, namespaces,
# nodes, resourcequotas, DRA claims, templates, classes and slices, leases, pods), and Lease
# writes, Events and audits need theirs beside them. The client's default pool is five a core (ten
# on two): past it, every request opens a connection and throws it away after.
POOL_SIZE = 32


def api_client(configuration: client.Configuration | None = None, identity: str = "") -> client.ApiClient:
    """A client whose requests say who sends them (`identity`: a replica's name; else this
    process's, as a command's), with a connection for every watch and more."""
    configuration = configuration or client.Configuration.get_default_copy()
    configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize or 0, POOL_SIZE)
    api = client.ApiClient(configuration)
    api.user_agent = f"gpu-admission/{VERSION} ({identity or process_name()})"
    return api


def impersonate(api: client.ApiClient, user: str | None, groups: Sequence[str] = ()) -> None:
    """Every request of `api` as `user` (kubectl's --as) and in `groups` (--as-group): the API
    server checks the caller may impersonate them, then authorizes as them. One group: the
    client sends each header once."""
    if len(groups) > 1:
        raise ValueError("--as-group may be given once")
    if user:
        api.set_default_header("Impersonate-User", user)
    if groups:
        if not user:
            raise ValueError("--as-group needs --as")
        api.set_default_header("Impersonate-Group", groups[0])


def load_config(kubeconfig: str | None = None, context: str | None = None) -> None:
    """Where the API server is: a kubeconfig file or context named on the command line (as kubectl's
    --kubeconfig and --context), else the pod's service account in a cluster, else KUBECONFIG
    (read at call time, not at the client's import)."""
    if kubeconfig or context:
        load_kubeconfig(kubeconfig, context)
        return
    try:
        config.load_incluster_config()
    except config.ConfigException:
        load_kubeconfig()


def load_kubeconfig(kubeconfig: str | None = None, context: str | None = None) -> None:
    """A kubeconfig as kubectl finds it: the file named, else KUBECONFIG, else ~/.kube/config."""
    config.load_kube_config(config_file=kubeconfig or environment_kubeconfig(), context=context)
