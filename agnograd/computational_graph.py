"""Pictures of the graph, as in Chainer's ``chainer.computational_graph``.

:func:`build_computational_graph` walks back from some outputs through the
graph's nodes and returns a :class:`ComputationalGraph`, whose
:meth:`~ComputationalGraph.dump` is the graph in Graphviz's DOT language and whose
:meth:`~ComputationalGraph.render` draws it (with the optional ``graphviz``
package: ``pip install agnograd[graph]``). In Jupyter the graph shows itself.

Examples
--------
>>> import numpy as np, agnograd, agnograd.functions as F
>>> from agnograd.computational_graph import build_computational_graph
>>> x = agnograd.Variable(np.array([1.0, 2.0]), name="x")
>>> loss = F.sum(F.tanh(x) ** 2)
>>> graph = build_computational_graph([loss])
>>> graph
<ComputationalGraph of 7 nodes and 6 edges>
>>> dot = graph.dump()  # write it to a file and run `dot -Tsvg graph.dot`
>>> dot.splitlines()[3]
'  1 [label="Tanh", shape="record", fillcolor="#6495ED", style="filled"];'
"""

from agnograd._graph_picture import ComputationalGraph, build_computational_graph

__all__ = ["ComputationalGraph", "build_computational_graph"]
