#!/usr/bin/python3
"""Fails when a ctest test neither holds a "cpus" slot nor is labelled "waits".

ci/test.sh runs ctest with more jobs than slots and one and a half "cpus" slots per core: a test
without a slot would run beside as many others as there are jobs, on cores that are already busy.
Usage: check_test_resources.py BUILD_DIR
"""
import json
import subprocess
import sys


def main():
    if len(sys.argv) != 2:
        print("usage: check_test_resources.py BUILD_DIR", file=sys.stderr)
        return 2
    listing = subprocess.run(["ctest", "--test-dir", sys.argv[1], "--show-only=json-v1"],
                             check=True, capture_output=True, text=True).stdout
    unslotted = []
    for test in json.loads(listing)["tests"]:
        props = {p["name"]: p["value"] for p in test.get("properties", [])}
        if "RESOURCE_GROUPS" not in props and "waits" not in props.get("LABELS", []):
            unslotted.append(test["name"])
    for name in unslotted:
        print(f"{name}: no RESOURCE_GROUPS cpus:1 and no LABELS waits (cmake/allocmark_test.cmake)")
    print(f"{len(unslotted)} test(s) without a CPU slot")
    return 1 if unslotted else 0


if __name__ == "__main__":
    sys.exit(main())
