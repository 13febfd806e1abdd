"""The pages' colours, each once: a prediction's (the op matrix, the backtest, the run's verdict figure) and, from
them, a cut's sides (its picture and its Model Explorer node data)."""

from __future__ import annotations

from ..vocabulary import Agreement, Prediction, Side

PREDICTION_COLOURS = {Prediction.PARSE: "#4caf50", Prediction.UNJUDGED: "#ffb300", Prediction.REFUSED: "#e53935"}
"""A prediction's colour: parse green, unjudged amber, refused red."""
NEUTRAL = "#bdbdbd"  # what is neither: a host segment's dot, a graph not run
KEPT = "#9e9e9e"  # a node predicted to parse that the cut keeps on the host

AGREEMENT_COLOURS = {
    Agreement.AGREES: PREDICTION_COLOURS[Prediction.PARSE],
    Agreement.UNJUDGED: PREDICTION_COLOURS[Prediction.UNJUDGED],
    Agreement.DISAGREES: PREDICTION_COLOURS[Prediction.REFUSED],
}
"""A backtest case's colour."""

HOST_REFUSED, HOST_UNJUDGED = f"{Side.HOST} ({Prediction.REFUSED})", f"{Side.HOST} ({Prediction.UNJUDGED})"
SIDE_COLOURS = {
    Side.DEVICE.value: PREDICTION_COLOURS[Prediction.PARSE],
    HOST_REFUSED: PREDICTION_COLOURS[Prediction.REFUSED],
    HOST_UNJUDGED: PREDICTION_COLOURS[Prediction.UNJUDGED],
    Side.HOST.value: KEPT,
}
"""The side a node of a cut runs on, and why a host node is there: "device", "host (refused)", "host
(unjudged)", "host" (predicted to parse, kept on the host by the cut)."""
