#!/usr/bin/env python3
"""A zklock serve caller using only Python's standard library.

caller.py URL PATH [TOKEN]: acquires the mutex at PATH, prints every event
of its stream as it comes (one JSON object a line), and holds until the
stream ends. A line "release" on stdin releases it. Exits 0 after
"released", 3 after "lost", 4 when the acquire is refused (it prints the
status and the error body first).
"""
import json
import sys
import threading
import urllib.error
import urllib.request


def post(url, token, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    if token:
        req.add_header("Authorization", "Bearer " + token)
    return urllib.request.urlopen(req)


def main():
    url, path = sys.argv[1], sys.argv[2]
    token = sys.argv[3] if len(sys.argv) > 3 else ""
    try:
        stream = post(url + "/v1/lock/acquire", token, {"path": path, "owner": "caller.py"})
    except urllib.error.HTTPError as e:
        print(json.dumps({"status": e.code, "body": json.loads(e.read())}), flush=True)
        return 4
    held = {}

    def release_on_request():
        for line in sys.stdin:
            if line.strip() == "release" and "id" in held:
                with post(url + "/v1/lock/release", token, {"id": held["id"]}) as r:
                    print(json.dumps({"release": json.loads(r.read())}), flush=True)

    threading.Thread(target=release_on_request, daemon=True).start()
    last = None
    for line in stream:
        ev = json.loads(line)
        print(json.dumps(ev), flush=True)
        if ev["event"] == "granted":
            held["id"] = ev["id"]
        last = ev["event"]
    return {"released": 0, "lost": 3}.get(last, 5)


if __name__ == "__main__":
    sys.exit(main())
