"""Reading a Prometheus endpoint for ``hetero top``: fetch its text (a bounded read, every failure
an answer rather than a traceback) and parse it into samples, with ``prometheus_client``'s parser
when installed (the ``metrics``/``serve`` extras) and a small tolerant one otherwise, or when the
strict parser refuses the text."""

from __future__ import annotations

import dataclasses
import http.client
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping

#: The most of an answer read: hetero's endpoints answer a few KiB; a wrong URL may stream forever.
MAX_BYTES = 8 * 2**20


@dataclasses.dataclass(frozen=True)
class Sample:
    """One line of the exposition: ``name{labels} value``."""

    name: str
    labels: Mapping[str, str]
    value: float


@dataclasses.dataclass(frozen=True)
class Scrape:
    """What one look at an endpoint found: samples, or why there are none."""

    url: str
    samples: tuple[Sample, ...] = ()
    error: str | None = None

    def values(self, name: str) -> list[Sample]:
        """The samples of ``name`` (a counter's ``..._total`` included as written)."""
        return [s for s in self.samples if s.name == name]


def metrics_url(text: str) -> str:
    """The URL to scrape for ``--metrics``: ``http://`` added when no scheme is given, ``/metrics``
    when no path is (``127.0.0.1:9100`` -> ``http://127.0.0.1:9100/metrics``)."""
    url = text if "://" in text else "http://" + text
    parts = urllib.parse.urlsplit(url)
    return parts._replace(path="/metrics").geturl() if not parts.path else url


def scrape(url: str, timeout: float = 2.0) -> Scrape:
    """GET ``url`` and parse it; an unreachable or unreadable endpoint is a :class:`Scrape` whose
    ``error`` says what happened."""
    if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
        return Scrape(url, error="not an http(s) URL")
    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:
            body = answer.read(MAX_BYTES + 1)
    except urllib.error.HTTPError as exc:
        return Scrape(url, error=f"HTTP {exc.code} {exc.reason}")
    except urllib.error.URLError as exc:
        return Scrape(url, error=f"unreachable: {exc.reason}")
    except (OSError, http.client.HTTPException, ValueError) as exc:  # timeouts, resets, a malformed URL
        return Scrape(url, error=f"unreachable: {exc or type(exc).__name__}")
    if len(body) > MAX_BYTES:
        return Scrape(url, error=f"answer over {MAX_BYTES // 2**20} MiB: not a metrics endpoint?")
    return Scrape(url, samples=tuple(parse(body.decode("utf-8", errors="replace"))))


def parse(text: str) -> list[Sample]:
    """The samples of a Prometheus text exposition."""
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:
        return list(parse_tolerant(text.splitlines()))
    try:
        return [Sample(s.name, dict(s.labels), float(s.value))
                for family in text_string_to_metric_families(text) for s in family.samples]
    except (ValueError, TypeError, IndexError):  # not quite the format: keep the lines that are
        return list(parse_tolerant(text.splitlines()))


_LINE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)\s*(?:\{(.*)\})?\s+(\S+)(?:\s+\S+)?\s*$")
_LABEL = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')
_ESCAPES = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


def parse_tolerant(lines: Iterable[str]) -> Iterable[Sample]:
    """Samples of the lines that read as ``name{labels} value [timestamp]``; comments, blank lines
    and lines that do not read are skipped."""
    for line in lines:
        match = _LINE.match(line.strip())
        if match is None or line.lstrip().startswith("#"):
            continue
        name, label_text, value_text = match.groups()
        try:
            value = float(value_text)
        except ValueError:
            continue
        labels = {key: re.sub(r"\\[\\\"n]", lambda m: _ESCAPES[m.group(0)], raw)
                  for key, raw in _LABEL.findall(label_text or "")}
        yield Sample(name, labels, value)
