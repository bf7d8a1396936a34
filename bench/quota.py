"""Quota admission with many pods tracked: the cost of one admission with 100 and with 100,000
pods in one replica's counters, the memory the counters take, what charging them under a new
policy set costs from what they keep (against counting them again, as a relist did), and the
latency of a strict admission with three replicas contending for one quota's Lease.

Pods are fed to the server's own tracking (webhook.cluster.quota.tracking) as a relist would feed them:
200 namespaces, pods of 20 shapes (slices of several profiles, on 500 nodes), matched by a
namespace quota, a policy-wide quota and a rule. Admission is measured the way /validate runs it
(the engine's judgment, then the budgets settled and the reservation made under the tracker's
lock), on a pod that fits. Beside it, what the lock is held for: the budgets settled, against the
whole engine that ran under it before (and on every strict retry), with 0 and 10 CEL rules.
Memory is the growth of this process's RSS while the pods are counted (the pods themselves are
made one at a time and dropped, as pages of a list are). Beside it, an UPDATE that grows no
budget (a counted pod relabelled), admitted for real and then shown by the watch: it holds the
pod as it stands after it until then, so a new policy set charges it so; and an admission with a
thousand such UPDATEs held, behind a watch that lags.

Strict contention: three replicas (each a tracker with its Lease client, through the real
kubernetes client, and with shares its keeper thread, as a replica runs them) against the test
suite's in-process API server, 8 threads each admitting distinct pods under one quota that
already holds 100 running pods (each replica's counters list them first), all at once and
offered at 150, 300 and 1,000 a second (each replica runs its engine behind its gate, as
webhook.state does, `--rules` CEL rules in the policy); p50/p99 per admission (and the p99 of the last two
thirds offered, "steady"), throughput and Lease requests per admission (from the first
admission on), side by side in one run for:
- `local`;
- `strict` admitting with a Lease write per pod (shares off, as before escrow);
- `strict` with shares, cold: no share granted before the first admission (as a replica that
  counts no pod under the budget starts; each replica's first admission waits on its first grant,
  and the admissions that arrive meanwhile behind it);
- `strict` with shares as shipped: each replica first grants itself shares of the budgets it
  counts pods under (`warm`, as it does once its pod watch has listed), and its keeper refills a
  share ahead of need.
Every denial is a false one (the budget holds a million pods), and counted.

    python bench/quota.py [--pods 100000] [--rounds 5] [--contended 450] [--rates burst,150,300,1000]
        [--limit 1000000] [--contended-only] [--rules 0] [--compiled]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import gc
import statistics
import sys
import threading
import time
import timeit
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
if "--compiled" in sys.argv:  # the engine compiled by mypyc, as the image runs it: first on the path
    from tools.compile_engine import build

    sys.path.insert(0, str(build(ROOT)))

from policies.engine import Engine  # noqa: E402
from policies.model.loader import load_texts  # noqa: E402
from policies.model.policyset import PolicySet  # noqa: E402
from policies.review.request import Operation, RequestInfo  # noqa: E402
from webhook.cluster.quota.counting.pod_counting import PodCounting  # noqa: E402
from webhook.cluster.quota.counting.reservations import UPDATE, PodRef  # noqa: E402
from webhook.cluster.quota.leases.ledger_leases import LedgerLeases  # noqa: E402
from webhook.cluster.quota.leases.shared_quota import SharedReservations  # noqa: E402
from webhook.cluster.quota.tracking import QuotaTracking, build_tracking  # noqa: E402
from webhook.events import Events  # noqa: E402

POLICIES = """
apiVersion: gpu-admission.io/v1alpha1
kind: GPUPolicy
metadata: {name: per-namespace}
spec:
  match: {namespaces: ["team-*"]}
  mig: {gpuModels: [A100-80GB, H100-80GB], defaultProfile: 1g.10gb}
  quota: {limits: {gpuEquivalents: "100000", pods: 100000}}
  rules:
    - {name: team, expression: "has(object.metadata.labels) && 'team' in object.metadata.labels", message: team}
---
apiVersion: gpu-admission.io/v1alpha1
kind: GPUPolicy
metadata: {name: cluster-wide}
spec:
  quota: {scope: policy, limits: {gpuEquivalents: "1000000", slices: {1g.10gb: 1000000}}}
"""
PROFILES = ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "7g.80gb")


def pod(i: int) -> dict[str, Any]:
    shape = i % 20
    resources = {"limits": {f"nvidia.com/mig-{PROFILES[shape % len(PROFILES)]}": str(1 + shape // 10)}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"pod-{i}",
            "namespace": f"team-{i % 200}",
            "uid": f"00000000-0000-4000-8000-{i:012d}",
            "labels": {"team": str(i % 200), "app": f"app-{shape}"},
        },
        "spec": {
            "nodeName": f"node-{i % 500}",
            "containers": [{"name": "main", "image": "cuda", "resources": resources}],
        },
        "status": {"phase": "Running"},
    }


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def tracked(engine: Engine, count: int) -> tuple[QuotaTracking, float, float]:
    """Tracking holding `count` pods; with the seconds and the RSS growth of counting them."""
    tracker = build_tracking(PodCounting(lambda: engine.policy_set))
    gc.collect()
    before = rss_mib()
    start = time.perf_counter()
    tracker.counting.replace_all(pod(i) for i in range(count))
    elapsed = time.perf_counter() - start
    gc.collect()
    return tracker, elapsed, rss_mib() - before


def admission_us(engine: Engine, tracker: QuotaTracking, admissions: int) -> float:
    candidate = pod(10**9)
    candidate["metadata"]["namespace"] = "team-7"
    ref = PodRef("team-7", "candidate")
    start = time.perf_counter()
    for _ in range(admissions):
        decision = tracker.admission.admit(engine.judge(candidate, tracker.budgets), ref, dry_run=True)
    elapsed = time.perf_counter() - start
    assert decision.allowed, decision.message
    return elapsed / admissions * 1e6


def update_us(engine: Engine, tracker: QuotaTracking, pods: int, shown: bool = True) -> float:
    """An UPDATE that grows no budget (a counted pod relabelled, a label no match reads), admitted
    for real, as /validate runs it: held as the pod stands after it (a new policy set charges it
    so) until the watch shows the updated pod, as it does next (`shown`); else each is held till
    the end, as behind a watch that lags (the UPDATEs a budget holds grow too)."""
    start = time.perf_counter()
    for i in range(pods):
        old = pod(i)
        new = pod(i)
        new["metadata"]["labels"]["app"] = "moved"
        metadata = new["metadata"]
        request = RequestInfo(namespace=metadata["namespace"], operation=Operation.UPDATE, old_object=old)
        ref = PodRef(metadata["namespace"], metadata["name"], "", metadata["uid"] + UPDATE)
        decision = tracker.admission.admit(engine.judge(new, tracker.budgets, request), ref, False, new)
        assert decision.allowed, decision.message
        if shown:
            tracker.counting.observe("MODIFIED", new)
    return (time.perf_counter() - start) / pods * 1e6


def recharge_ms(count: int, rounds: int) -> float:
    """Median ms to charge `count` counted pods under a new policy set (a limit changed) from
    the counters' records."""
    sets = [
        PolicySet(load_texts([("bench.yaml", POLICIES.replace("pods: 100000", f"pods: {100000 - i}"))]).policies)
        for i in range(2)
    ]
    current = [sets[0]]
    counting = PodCounting(lambda: current[0])
    counting.replace_all(pod(i) for i in range(count))
    timings = []
    for i in range(rounds):
        current[0] = sets[(i + 1) % 2]
        start = time.perf_counter()
        assert counting.recharge()
        timings.append((time.perf_counter() - start) * 1000)
    return statistics.median(timings)


STRICT = """
apiVersion: gpu-admission.io/v1alpha1
kind: GPUPolicy
metadata: {name: contended}
spec:
  match: {namespaces: [team-a]}
  quota: {limits: {pods: %d}, consistency: %s}
%s"""


def rules(count: int) -> str:
    """`count` CEL rules for the contended policy, each its own text (none evaluated once for all)."""
    rule = "    - {{name: r{0}, expression: \"object.spec.containers.all(c, c.name != 'x{0}')\"}}"
    lines = [rule.format(k) for k in range(count)]
    return "  rules:\n" + "\n".join(lines) + "\n" if lines else ""


MODES = {  # label: (consistency, shares, warmed: shares granted as the replica starts)
    "local": ("local", False, False),
    "strict, a write a pod": ("strict", False, False),
    "strict, shares, cold": ("strict", True, False),
    "strict, shares": ("strict", True, True),
}
UPDATES = 1000  # pods updated within a reservation's time, each held
RUNNING = 100  # pods under the budget already, as the replicas' pod watches list them


class Run(NamedTuple):
    seconds: list[float]  # per admission, in the order offered
    took: float  # from the first admission offered to the last answered
    conflicts: int  # Lease writes refused as stale, from the first admission on
    requests: int  # to Leases, likewise
    denied: int  # all false: far from the limit
    grants: int  # shares granted while admitting ...
    ahead: int  # ... of them by the keeper, before the share ran out


def contended(
    mode: str,
    admissions: int,
    rate: float | None = None,
    limit: int = 1_000_000,
    replica_count: int = 3,
    threads: int = 8,
    rule_count: int = 0,
) -> Run:
    """`admissions` by `replica_count` replicas at once (`threads` each), all at once or offered at
    `rate` a second, under a budget of `limit` pods (not the set-up: the API server, the
    clients, the policies, the counters' list and the warm-up's grants)."""
    import kubernetes

    from tests.support.kube_fake import FakeKube
    from webhook.cluster.quota.shares.escrow import Escrow

    consistency, shares, warmed = MODES[mode]
    kube = FakeKube()
    kube.start()
    loaded = load_texts([("strict.yaml", STRICT % (limit, consistency, rules(rule_count)))])
    assert not loaded.problems, loaded.problems
    engine = Engine(PolicySet(loaded.policies))
    replicas, keepers = [], []
    for index in range(replica_count):
        name = f"replica-{index}"
        api = kubernetes.client.ApiClient(kubernetes.client.Configuration(host=f"http://127.0.0.1:{kube.port}"))
        events = Events()  # as a replica's view has: the keeper hears of its shares on it
        coordination = kubernetes.client.CoordinationV1Api(api)
        shared = SharedReservations(LedgerLeases(coordination, "gpu-admission", name, events=events))
        counting = PodCounting(lambda: engine.policy_set)
        counting.replace_all(running())
        # As a replica runs them: its shares, and their keeper (entries rewritten, refills ahead).
        tracker = build_tracking(counting, events, shared, Escrow(name, events=events) if shares else None)
        if tracker.keeper is not None:
            keepers.append(tracker.keeper)
            tracker.keeper.start()
        replicas.append(tracker)
    if warmed:  # as each replica does once its pod watch has listed, before admissions arrive
        assert all(tracker.budgets.warm() for tracker in replicas)

    def counted() -> tuple[int, int, int]:
        """Lease conflicts, grants and grants made ahead, so far."""
        escrows = [r.budgets.escrow for r in replicas if r.budgets.escrow is not None]
        conflicts = sum(r.budgets.shared.leases.conflicts for r in replicas if r.budgets.shared is not None)
        return conflicts, sum(e.refills for e in escrows), sum(e.ahead for e in escrows)

    gates = [threading.Semaphore(1) for _ in replicas]
    at_start = counted()  # the warm-up's are the replicas' start, not the admissions'
    seconds = [0.0] * admissions  # by admission, in the order offered
    denied = []
    before = len(kube.requests)  # likewise
    start_all = time.perf_counter()

    def admit(i: int) -> None:
        if rate is not None:  # offered at a steady rate: wait for this admission's moment
            time.sleep(max(0.0, start_all + i / rate - time.perf_counter()))
        tracker = replicas[i % replica_count]
        candidate = pod(i)
        candidate["metadata"]["namespace"] = "team-a"
        ref = PodRef("team-a", f"pod-{i}", uid=f"uid-{i}")
        start = time.perf_counter()
        with gates[i % replica_count]:  # as a replica runs its engine: one run at a time (webhook.state)
            judged = engine.judge(candidate, tracker.budgets)
        decision = tracker.admission.admit(judged, ref, dry_run=False)
        seconds[i] = time.perf_counter() - start
        if not decision.allowed:
            denied.append(decision.message)

    with concurrent.futures.ThreadPoolExecutor(replica_count * threads) as pool:
        list(pool.map(admit, range(admissions)))
    elapsed = time.perf_counter() - start_all
    requests = sum(1 for r in kube.requests[before:] if r.resource == "leases")
    for keeper in keepers:
        keeper.stop()
    kube.stop()
    conflicts, grants, ahead = (now - then for now, then in zip(counted(), at_start, strict=True))
    return Run(seconds, elapsed, conflicts, requests, len(denied), grants, ahead)


def running() -> list[dict[str, Any]]:
    """The pods already under the contended budget (a relist's page)."""
    found = []
    for i in range(RUNNING):
        existing = pod(i)
        existing["metadata"].update(namespace="team-a", name=f"running-{i}", uid=f"running-{i}")
        found.append(existing)
    return found


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--admissions", type=int, default=2000)
    parser.add_argument("--contended", type=int, default=450, help="admissions by three contending replicas")
    parser.add_argument("--rates", default="burst,150,300,1000", help="offered loads: burst or admissions a second")
    parser.add_argument("--limit", type=int, default=1_000_000, help="pods the contended budget holds")
    parser.add_argument("--contended-only", action="store_true", help="only the contended admissions")
    parser.add_argument("--rules", type=int, default=0, help="CEL rules in the contended policy")
    parser.add_argument("--compiled", action="store_true", help="with the engine compiled by mypyc (read at import)")
    args = parser.parse_args()
    if not args.contended_only:
        tracking(args)
        settling(args.rounds)
    contention(args)


def tracking(args: argparse.Namespace) -> None:
    loaded = load_texts([("bench.yaml", POLICIES)])
    assert not loaded.problems, loaded.problems
    engine = Engine(PolicySet(loaded.policies))
    small, _, _ = tracked(engine, 100)
    large, relist_s, grown = tracked(engine, args.pods)
    assert large.counting.tracked_pods == args.pods
    figures: dict[str, list[float]] = {"100": [], str(args.pods): []}
    for _ in range(args.rounds):
        figures["100"].append(admission_us(engine, small, args.admissions))
        figures[str(args.pods)].append(admission_us(engine, large, args.admissions))
    base = statistics.median(figures["100"])
    print("quota admission (judge, then settle and reserve under the lock), 2 quotas and a rule matching")
    for label, values in figures.items():
        median = statistics.median(values)
        print(
            f"  {label:>7} pods tracked: {median:7.1f} µs/admission (min {min(values):.1f})"
            f"  ratio to 100: {median / base:.2f}x"
        )
    updates = [update_us(engine, large, UPDATES) for _ in range(args.rounds)]
    median, fastest = statistics.median(updates), min(updates)
    print(f"  an UPDATE growing no budget, admitted and shown: {median:7.1f} µs (min {fastest:.1f})")
    update_us(engine, large, UPDATES, shown=False)
    held = [admission_us(engine, large, args.admissions) for _ in range(args.rounds)]
    print(f"  an admission with {UPDATES} such UPDATEs held, the watch behind: {statistics.median(held):.1f} µs")
    print(f"counting {args.pods} pods (a relist): {relist_s:.2f} s, {relist_s / args.pods * 1e6:.1f} µs a pod")
    print(f"memory of the counters: RSS grew {grown:.1f} MiB ({grown * 2**20 / args.pods:.0f} bytes a pod)")
    recharge = recharge_ms(args.pods, args.rounds)
    print(
        f"a new policy set over {args.pods} pods: charged from the counters in {recharge:.2f} ms"
        f" ({large.counting.shapes} records) vs counting them again {relist_s * 1000:.0f} ms"
        f" ({relist_s * 1000 / recharge:.0f}x), and no list from the API server"
    )


def settling(rounds: int) -> None:
    """What runs under the counters' lock for an admission, and again on each strict retry: the
    budgets settled (Decision.settle), beside the engine run it replaced there (Engine.validate),
    on one pod under the contended policy with 0 and 10 CEL rules."""
    print("under the counters' lock, per admission and per strict retry (µs, best of rounds):")
    for count in (0, 10):
        whole, settle = settle_us(count, rounds)
        ratio = whole / settle
        print(f"  {count:2} rules: the engine {whole:6.1f}   budgets settled {settle:5.1f}   ({ratio:.1f}x less)")


def settle_us(rule_count: int, rounds: int, calls: int = 2000) -> tuple[float, float]:
    loaded = load_texts([("s.yaml", STRICT % (1_000_000, "local", rules(rule_count)))])
    engine = Engine(PolicySet(loaded.policies))
    counting = PodCounting(lambda: engine.policy_set)
    counting.replace_all(running())
    tracker = build_tracking(counting).budgets
    candidate = pod(7)
    candidate["metadata"]["namespace"] = "team-a"
    judged = engine.judge(candidate, tracker)
    whole = min(timeit.repeat(lambda: engine.validate(candidate, tracker), number=calls, repeat=rounds))
    settle = min(timeit.repeat(lambda: judged.settle(tracker), number=calls, repeat=rounds))
    return whole / calls * 1e6, settle / calls * 1e6


def contention(args: argparse.Namespace) -> None:
    print(
        f"three replicas x 8 threads admitting {args.contended} pods under one quota of {args.limit:,}"
        f" holding {RUNNING} already, {args.rules} CEL rules, side by side:"
    )
    for offered in args.rates.split(","):
        rate = None if offered == "burst" else float(offered)
        print(f"  offered: {offered if rate is None else f'{rate:g}/s'}")
        for mode in MODES:
            run = contended(mode, args.contended, rate, args.limit, rule_count=args.rules)
            p50, p99 = (percentile(run.seconds, share) * 1000 for share in (0.5, 0.99))
            steady = percentile(run.seconds[len(run.seconds) // 3 :], 0.99) * 1000
            grants = f"  grants {run.grants} ({run.ahead} ahead)" if MODES[mode][1] else ""
            print(
                f"    {mode:22} p50 {p50:6.1f} ms  p99 {p99:7.1f} ms  (steady {steady:5.1f})"
                f"  {args.contended / run.took:6.0f} admissions/s"
                f"  Lease requests/admission {run.requests / args.contended:.2f}  conflicts {run.conflicts}"
                f"  false denials {run.denied}{grants}"
            )


if __name__ == "__main__":
    main()
