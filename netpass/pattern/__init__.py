"""Pattern language: describe a sub-graph, match it, read what was bound.

```python
from netpass.pattern import Matcher, wrap_type, any_input, optional, Or, consumers_count
first = wrap_type(ops.Transpose, [any_input(), wrap_type(ops.Constant)], consumers_count(1))
m = Matcher(wrap_type(ops.Transpose, [first, wrap_type(ops.Constant)]), "Pair", explain=True)
if not m.match(node):
    print(m.explain())          # the deepest partial match and why it stopped
```
"""
from __future__ import annotations

from .matcher import Matcher, MatchFailure, matcher_logging_enabled
from .op import (
                 Label,
                 Optional,
                 Or,
                 Pattern,
                 PatternError,
                 PatternOutput,
                 WrapType,
                 any_input,
                 as_pattern,
                 optional,
                 wrap_type,
)
from .predicates import (
                 Predicate,
                 all_of,
                 as_predicate,
                 attrs_match,
                 binds,
                 consumers_count,
                 consumers_more_than,
                 has_static_dim,
                 has_static_dims,
                 has_static_rank,
                 has_static_shape,
                 rank_equals,
                 rank_more_than,
                 shape_matches,
                 type_matches,
                 type_matches_any,
)

__all__ = [
    "Matcher", "MatchFailure", "matcher_logging_enabled", "Pattern", "WrapType", "PatternOutput",
    "Label", "Or", "Optional", "PatternError", "wrap_type", "any_input", "optional", "as_pattern",
    "Predicate", "as_predicate", "all_of", "attrs_match", "binds", "consumers_count",
    "consumers_more_than", "has_static_dim", "has_static_dims", "has_static_rank",
    "has_static_shape", "rank_equals", "rank_more_than", "shape_matches", "type_matches",
    "type_matches_any",
]
