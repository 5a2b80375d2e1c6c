"""Validates sample run_code calls against the tool definitions `runbox tool-schema` prints
for MCP, Anthropic and OpenAI (strict mode: every property present, optional ones null).
Prints 'N passed, N failed'; exits non-zero when any failed.

usage: schemas.py RUNBOX
"""

import json
import subprocess
import sys

import jsonschema

RESULTS = []


def check(name, condition, detail=""):
    RESULTS.append(bool(condition))
    print(("ok   " if condition else "FAIL ") + name + ("" if condition else f": {detail}"), flush=True)


def definition(runbox, fmt):
    return json.loads(subprocess.run([runbox, "tool-schema", "--format", fmt], check=True, capture_output=True).stdout)


def valid(schema, instance):
    try:
        jsonschema.validate(instance, schema, cls=jsonschema.Draft202012Validator)
        return None
    except jsonschema.ValidationError as e:
        return e.message


SAMPLE = {
    "runtime": "python",
    "code": "print(sum(range(10)))",
    "limits": {"wall_time_ms": 5000, "memory_bytes": 268435456},
    "checks": [{"type": "stdout_contains", "text": "45"}, {"type": "exit_code", "equals": 0}],
    "env": {"MODE": "test"},
}

STRICT_SAMPLE = {
    "runtime": "python",
    "code": "print(sum(range(10)))",
    "files": None,
    "entrypoint": None,
    "stdin": None,
    "args": None,
    "env": [{"name": "MODE", "value": "test"}],
    "limits": {
        "wall_time_ms": 5000,
        "cpu_time_ms": None,
        "memory_bytes": 268435456,
        "processes": None,
        "disk_bytes": None,
        "output_bytes": None,
        "open_files": None,
    },
    "checks": [{"type": "stdout_contains", "text": "45"}, {"type": "exit_code", "equals": 0}],
}


def main(runbox):
    mcp = definition(runbox, "mcp")
    check("mcp: a sample call validates", valid(mcp["inputSchema"], SAMPLE) is None, valid(mcp["inputSchema"], SAMPLE))
    check("mcp: a bad call is refused", valid(mcp["inputSchema"], {"code": "x"}) is not None)
    check("mcp: has the output schema", "verdict" in mcp["outputSchema"]["properties"])

    anthropic = definition(runbox, "anthropic")
    check("anthropic: name, description, input_schema", sorted(anthropic) == ["description", "input_schema", "name"], sorted(anthropic))
    check("anthropic: a sample call validates", valid(anthropic["input_schema"], SAMPLE) is None, valid(anthropic["input_schema"], SAMPLE))

    openai = definition(runbox, "openai")
    function = openai["function"]
    check("openai: function form, strict", openai["type"] == "function" and function["strict"] is True, openai)
    parameters = function["parameters"]
    check("openai: a strict sample call validates", valid(parameters, STRICT_SAMPLE) is None, valid(parameters, STRICT_SAMPLE))
    partial = dict(STRICT_SAMPLE)
    del partial["stdin"]
    check("openai: strict mode needs every property", valid(parameters, partial) is not None)
    text = json.dumps(parameters)
    check("openai: no $schema/format/default keywords", all(f'"{k}":' not in text for k in ("$schema", "format", "default")), text[:300])

    failed = RESULTS.count(False)
    print(f"{len(RESULTS) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
