"""runloom_client: a client of the runloom HTTP API (docs/openapi.yaml).

    from runloom_client import Client
    c = Client("http://127.0.0.1:8080", token=os.environ["RUNLOOM_TOKEN"])
    run = c.start_run("blog", {"topic": "durable runs"}, idempotency_key="blog-1")
    for msg in c.follow(run["id"]):
        print(msg.seq, msg.event)
"""

from ._client import *  # noqa: F403  (the names of _client.__all__)
from ._client import __all__

__version__ = "0.1.0"
