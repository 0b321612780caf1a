"""A stand-in for the two ``dexcli`` commands the examples' smoke test runs.

``dexcli flow history|state FLOW_ID --server ADDR --output json [--page-size N]
[--run-id ID]`` prints the run's history page or state as dexcli's JSON does. The
smoke test checks a Flow's history right after its start Step, so the answer must
come fast, as the Go binary's does: this script starts without ``site`` and asks the
harness, which keeps a gRPC channel to the engine open, over a local HTTP call. The
harness writes it into the temporary export with its interpreter and helper address.
"""

import json
import sys
import urllib.error
import urllib.parse
import urllib.request

HELPER = "http://127.0.0.1:0"  # the harness writes its helper's address here


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[0] != "flow" or argv[1] not in ("history", "state"):
        sys.stderr.write("dexcli stand-in: only 'flow history' and 'flow state' exist\n")
        return 2
    options = {"command": argv[1], "flow_id": argv[2]}
    rest = argv[3:]
    for index in range(0, len(rest) - 1, 2):
        options[rest[index].lstrip("-").replace("-", "_")] = rest[index + 1]
    url = f"{HELPER}/flow?{urllib.parse.urlencode(options)}"
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            sys.stdout.write(response.read().decode())
    except urllib.error.HTTPError as error:
        sys.stderr.write(json.loads(error.read().decode()).get("error", str(error)) + "\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
