"""Altair's chart classes, each with one more thing: it displays offline (an SVG drawn by
vl-convert in the kernel), and what it is composed into displays so too.

Imported only by :mod:`safecons.charts`, and only once Altair is there (the charts extra is
optional). The classes are ordinary subclasses written here, so a chart is built as one from
the start (``Chart(...)``), pickles by its module's name and never changes class: a chart of
Altair's own class becomes one of these by :func:`offline`, which reads the chart's Vega-Lite
spec back as one (Altair's ``from_dict``).
"""

from __future__ import annotations

from typing import Any, Final

import altair as alt


def _have_vl_convert() -> bool:
    try:
        import vl_convert  # noqa: F401
    except ImportError:  # Altair alone, without the charts extra: display as Altair does
        return False
    return True


def svg(chart: Any) -> str:
    """The chart as SVG, drawn by vl-convert with the Vega-Lite version Altair writes."""
    import vl_convert

    version = "_".join(alt.SCHEMA_VERSION.split(".")[:2])  # "v6.4.1" -> "v6_4"
    return str(vl_convert.vegalite_to_svg(chart.to_dict(), vl_version=version))


class _Offline:
    """What a chart of this module adds to its Altair class."""

    def _repr_mimebundle_(self, *args: Any, **kwargs: Any) -> Any:
        # Altair's default renderer is the one that needs a CDN; one the user picked is theirs.
        if alt.renderers.active == "default" and _have_vl_convert():
            return {"image/svg+xml": svg(self)}
        plain: Any = super()
        return plain._repr_mimebundle_(*args, **kwargs)

    # What composes charts into a new one (of another Altair class) gives one that displays
    # offline too; Altair's own methods that return a copy (``properties``, ``interactive``,
    # ``configure_*``) keep the class by themselves.
    def __add__(self, other: Any) -> Any:
        plain: Any = super()
        return offline(plain.__add__(other))

    def __or__(self, other: Any) -> Any:
        plain: Any = super()
        return side_by_side(plain.__or__(other))

    def __and__(self, other: Any) -> Any:
        plain: Any = super()
        return side_by_side(plain.__and__(other))

    # ``plain | chart``: Python asks the right side first when its class derives from the left
    # side's (an alt.Chart and a chart of this module), so the result displays offline too.
    def __radd__(self, other: Any) -> Any:
        return _reflected(other, "__add__", self)

    def __ror__(self, other: Any) -> Any:
        return _reflected(other, "__or__", self)

    def __rand__(self, other: Any) -> Any:
        return _reflected(other, "__and__", self)

    def facet(self, *args: Any, **kwargs: Any) -> Any:
        plain: Any = super()
        return offline(plain.facet(*args, **kwargs))

    def repeat(self, *args: Any, **kwargs: Any) -> Any:
        plain: Any = super()
        return offline(plain.repeat(*args, **kwargs))


class Chart(_Offline, alt.Chart):
    pass


class LayerChart(_Offline, alt.LayerChart):
    pass


class HConcatChart(_Offline, alt.HConcatChart):
    pass


class VConcatChart(_Offline, alt.VConcatChart):
    pass


class ConcatChart(_Offline, alt.ConcatChart):
    pass


class FacetChart(_Offline, alt.FacetChart):
    pass


class RepeatChart(_Offline, alt.RepeatChart):
    pass


#: Each Altair chart class, and its class here.
_OURS: Final[dict[type, type]] = {
    alt.Chart: Chart,
    alt.LayerChart: LayerChart,
    alt.HConcatChart: HConcatChart,
    alt.VConcatChart: VConcatChart,
    alt.ConcatChart: ConcatChart,
    alt.FacetChart: FacetChart,
    alt.RepeatChart: RepeatChart,
}

# Named and documented as Altair's classes, so a chart's repr and help read as Altair's.
for _cls in _OURS.values():
    _cls.__doc__ = _cls.__mro__[2].__doc__


def _reflected(other: Any, name: str, chart: Any) -> Any:
    if not isinstance(other, alt.TopLevelMixin):
        return NotImplemented
    composed = getattr(other, name)(chart)
    return offline(composed) if name == "__add__" else side_by_side(composed)


def side_by_side(chart: Any) -> Any:
    """Charts put side by side (or one above the other), each keeping its colours: Vega-Lite
    would merge their colour scales into one, the second chart's labels in the first's bands'
    shades."""
    return offline(chart).resolve_scale(color="independent")


def offline(chart: Any) -> Any:
    """``chart`` if it displays offline already, else a new chart of the matching class here,
    read back from the chart's Vega-Lite spec (``chart`` is unchanged)."""
    if isinstance(chart, _Offline):
        return chart
    ours: Any = next(_OURS[cls] for cls in type(chart).__mro__ if cls in _OURS)  # TopLevelMixin
    spec = chart.to_dict()
    # What to_dict adds to a top-level spec is no part of the chart: the schema's address, the
    # theme's config where the chart has none of its own, and its inline data gathered into
    # top-level datasets. A chart holding any of these could not be composed with another.
    spec.pop("$schema", None)
    if chart.config is alt.Undefined:
        spec.pop("config", None)
    spec = _inlined(spec, spec.pop("datasets", {}))
    # to_dict checked the spec: reading it back need not check it again.
    return ours.from_dict(spec, validate=False)


def _inlined(spec: Any, datasets: dict[str, Any]) -> Any:
    """``spec`` with each use of a named dataset of ``datasets`` replaced by its values."""
    if isinstance(spec, list):
        return [_inlined(item, datasets) for item in spec]
    if not isinstance(spec, dict):
        return spec
    data = spec.get("data")
    if isinstance(data, dict) and data.get("name") in datasets:
        rest = {k: v for k, v in data.items() if k != "name"}
        spec = {**spec, "data": {"values": datasets[data["name"]], **rest}}
    return {k: v if k == "data" else _inlined(v, datasets) for k, v in spec.items()}
