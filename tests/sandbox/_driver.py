"""A tiny runner stand-in for the SIGINT test: opens a sandbox as the runner does, prints what would
outlive it (directory or container id), then blocks in a command until interrupted.

usage: python _driver.py TARGET JSON_KWARGS_WITH_RUN_ID
"""

import json
import sys

from hydra.utils import instantiate

factory = instantiate({"_target_": sys.argv[1], **json.loads(sys.argv[2])})  # kwargs include run_id
sandbox = factory.open("v1:sigint", {})
try:
    print(getattr(sandbox, "container_id", None) or sandbox.root, flush=True)
    sandbox.exec("sleep 60", timeout=120)
finally:
    sandbox.close()
    factory.shutdown()
