"""The figures a family declares in the analysis (`FamilyFacts.figures`) are drawn by the generic renderers of
specsuite/reports/plots.py: in page order, each by its kind, with its note when it has nothing to draw, and left out
silently when its family did not run or its kind is unknown; the renderers name no family."""

from __future__ import annotations

from pathlib import Path

from specsuite.reports import plots
from specsuite.reports.blocks import FigureRef
from specsuite.results.types import (
    ANALYSIS_KEY,
    ECDF,
    ESTIMATES_PER_CASE,
    Comparison,
    Document,
    EcdfPanel,
    EstimateRow,
    FamilyFacts,
    FigureSpec,
)


def _document(*, ran: bool) -> Document:
    ecdf = FigureSpec(kind=ECDF, file="latency.png", title="Latency ECDF", caption="c", place=20, when_run=True,
                      absent_note="Latency: none.", x_label="ms", y_label="fraction", unit="ms",
                      panels=[EcdfPanel(title="setting one", series={"a": [1.0, 2.0, 3.0], "b": [2.0, 4.0]}),
                              EcdfPanel(title="empty", series={"a": [], "b": []})])
    rates = FigureSpec(kind=ESTIMATES_PER_CASE, file="rates.png", title="Rates", place=10, metrics=["absent_metric"],
                       absent_note="Rates: no data.")
    unknown = FigureSpec(kind="a kind no renderer draws", file="x.png", place=5)
    analysis = Comparison(arm_order=["a", "b"], baseline="b", workloads={"timing": "run" if ran else "not run"},
                          estimates=[EstimateRow(arm="a", metric="other", temperature=0.0, top_p=1.0, value=1.0)],
                          families={"timing": FamilyFacts(figures=[ecdf]), "counts": FamilyFacts(figures=[unknown, rates])})
    document = Document(arm_order=["a", "b"])
    document.put(ANALYSIS_KEY, Comparison.from_dict(analysis.to_dict()))  # as results.json carries it
    return document


def test_declared_figures_are_drawn_in_page_order_with_their_notes(tmp_path: Path) -> None:
    figures, notes = plots.render_plots(_document(ran=True), tmp_path)
    assert notes[:1] == ["Rates: no data."] and notes[1].startswith("Spread figure")  # place 10, before the ECDF; the unknown kind (place 5) left out
    assert [(figure.path.name, figure.title) for figure in figures] == [("latency.png", "Latency ECDF")]
    assert isinstance(figures[0], FigureRef) and (tmp_path / "latency.png").stat().st_size > 0
    assert not (tmp_path / "x.png").exists()


def test_a_figure_of_a_family_that_did_not_run_is_left_out_silently(tmp_path: Path) -> None:
    figures, notes = plots.render_plots(_document(ran=False), tmp_path)
    assert figures == [] and notes[:1] == ["Rates: no data."] and len(notes) == 2  # and the spread's


def test_the_renderers_name_no_family() -> None:
    source = Path(plots.__file__).read_text().split('"""', 2)[2]  # the code, past the module docstring
    assert not [name for name in ("gsm8k", "bench", "itls", "lossless", "integrity", "accept_length", "invalid_ids")
                if name in source]
