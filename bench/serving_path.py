"""Instructions a review costs in the process, layer by layer, for this tree and an earlier commit
side by side (callgrind: steady where seconds on this shared machine are not).

Three figures a review, for /mutate (the bench pod as written) and /validate (as mutated):
- the engine call alone (bench/callgrind.py's count);
- the review: the body decoded and parsed into the typed request, the engine call through
  webhook.serving.admission, and the answer encoded;
- the WSGI app as gunicorn calls it (the environ gunicorn builds, the review endpoint, metrics,
  logging at INFO as shipped, the body and headers handed back).
The last minus the one before is what the HTTP framework costs a review; TLS and gunicorn's own
parsing are outside the process's app and measured by bench/load.py and bench/control_plane.py.
Compiled: this tree with its engine compiled by mypyc, as the image ships it.

    python bench/serving_path.py [--baseline 24a13ef] [--calls 200]
"""

from __future__ import annotations

import argparse
import sys

import callgrind  # bench/callgrind.py: the script's own folder is on the path
from engine import POD, policy  # bench/engine.py: its pod and its 10 matching policies

sys.path.insert(0, str(callgrind.ROOT))
from tests.support.reviews import review  # noqa: E402

CHILD = r"""
import collections, io, json, sys
sys.path.append(sys.argv[3])  # the work tree, behind a compiled engine's folder
import orjson
from policies.engine import Engine
from policies.model.loader import load_texts
from policies.model.policyset import PolicySet
from webhook import logs
from webhook.serving import admission
from webhook.serving.app import create_app
from webhook.serving.review import parse_review
from webhook.state import EngineHolder, AdmissionSettings

spec = json.load(open(sys.argv[1]))
calls = int(sys.argv[2])
logs.configure("INFO")
holder = EngineHolder(AdmissionSettings())
holder.swap(Engine(PolicySet(load_texts([tuple(t) for t in spec["texts"]]).policies)))
app = create_app(holder)
endpoint, layer = spec["endpoint"], spec["layer"]
body = json.dumps(spec["review"]).encode()
decide = admission.mutate if endpoint == "mutate" else admission.validate
BASE = {
    "REQUEST_METHOD": "POST", "SCRIPT_NAME": "", "PATH_INFO": "/" + endpoint, "QUERY_STRING": "timeout=10s",
    "RAW_URI": "/" + endpoint + "?timeout=10s", "SERVER_PROTOCOL": "HTTP/1.1", "SERVER_NAME": "0.0.0.0",
    "SERVER_PORT": "8443", "REMOTE_ADDR": "10.0.0.1", "REMOTE_PORT": "51234", "HTTP_HOST": "gpu-admission.svc:443",
    "HTTP_USER_AGENT": "kube-apiserver-admission", "HTTP_ACCEPT": "application/json, */*",
    "HTTP_ACCEPT_ENCODING": "gzip", "CONTENT_TYPE": "application/json", "CONTENT_LENGTH": str(len(body)),
    "wsgi.version": (1, 0), "wsgi.url_scheme": "https", "wsgi.errors": sys.stderr, "wsgi.multithread": True,
    "wsgi.multiprocess": False, "wsgi.run_once": False, "wsgi.file_wrapper": None, "wsgi.input_terminated": True,
}
statuses = []
def start_response(status, headers, exc_info=None):
    statuses.append(status)

def through_app(_):
    environ = dict(BASE)
    environ["wsgi.input"] = io.BytesIO(body)
    return b"".join(app(environ, start_response))

def review(_):
    return orjson.dumps(decide(holder, parse_review(orjson.loads(body))).to_review("admission.k8s.io/v1"))

pod = spec["review"]["request"]["object"]
def engine_call(_):
    if endpoint == "mutate":
        return holder.engine.mutate(pod)
    return holder.engine.validate(pod, holder.budgets)

call = {"app": through_app, "review": review, "engine": engine_call}[layer]
for _ in range(5):
    call(0)
assert set(statuses) <= {"200 OK"}, statuses
collections.deque(map(call, range(calls)), maxlen=0)  # the only part counted
"""

LAYERS = (("engine", "the engine call"), ("review", "+ review parsed, answer encoded"), ("app", "+ WSGI app"))


def mutated_pod(texts: list[tuple[str, str]]) -> dict[str, object]:
    from policies.engine import Engine
    from policies.model.loader import load_texts
    from policies.model.policyset import PolicySet

    mutated: dict[str, object] = Engine(PolicySet(load_texts(texts).policies)).mutate(POD).object
    return mutated


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--baseline", default="HEAD", help="the commit to compare with")
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    if not callgrind.available():
        sys.exit("valgrind is not installed")
    texts = [(f"p{i}.yaml", policy(i, True)) for i in range(10)]
    trees = [callgrind.tree(args.baseline), callgrind.tree(""), callgrind.compiled_tree()]
    print(f"instructions a review (callgrind), side by side: {args.baseline} | this tree | this tree compiled")
    for endpoint, obj in (("mutate", POD), ("validate", mutated_pod(texts))):
        for layer, label in LAYERS:
            spec = {"endpoint": endpoint, "layer": layer, "texts": texts, "review": review(obj)}  # type: ignore[no-untyped-call]
            counts = [callgrind.counted(source, CHILD, spec, args.calls, str(callgrind.ROOT)) for source in trees]
            print(
                f"  /{endpoint:<9} {label:<34} {counts[0] / 1e6:7.3f} M | {counts[1] / 1e6:7.3f} M"
                f" ({counts[1] / counts[0]:.2f}x) | {counts[2] / 1e6:7.3f} M ({counts[2] / counts[0]:.2f}x)"
            )


if __name__ == "__main__":
    main()
