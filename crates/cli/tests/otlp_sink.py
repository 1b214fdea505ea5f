"""An OTLP/HTTP receiver for the command line's tests: oteltest's HttpSink (a maintained
package, https://pypi.org/project/oteltest/), which parses each export with the
opentelemetry-proto package. Every trace request it receives is written to OUT again as
binary protobuf, each prefixed by its length (4 bytes, little-endian), for the test to read.

usage: python otlp_sink.py PORT OUT
"""

import logging
import struct
import sys
import threading

from oteltest.sink import HttpSink
from oteltest.sink.handler import RequestHandler


class ToFile(RequestHandler):
    def __init__(self, path):
        self.out = open(path, "ab")
        self.lock = threading.Lock()

    def handle_trace(self, request, headers):
        data = request.SerializeToString()
        with self.lock:
            self.out.write(struct.pack("<I", len(data)) + data)
            self.out.flush()

    def handle_metrics(self, request, headers):
        pass

    def handle_logs(self, request, headers):
        pass


def main():
    port, out = int(sys.argv[1]), sys.argv[2]
    sink = HttpSink(ToFile(out), logging.getLogger("otlp_sink"), port=port, daemon=True)
    sink.start()
    print("ready", flush=True)
    # Runs until the test closes standard input.
    sys.stdin.read()
    sink.stop()


if __name__ == "__main__":
    main()
