"""YAML as a job spec is read: PyYAML's safe loader, except that a key given twice in one mapping is refused.

PyYAML keeps the last of two equal keys without a word (YAML 1.2 says keys are unique; PyYAML does not check), so
`budget_usd: 5` followed further down by `budget_usd: 500` launched with $500. The loader raises a
ConstructorError whose mark is the second key's line: the spec loader turns it into one line naming the file and
that line."""
from __future__ import annotations

import yaml
from yaml.constructor import ConstructorError


class StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a duplicate key in a mapping."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict = {}
            for key_node, _ in node.value:  # the mapping's own keys: what `<<:` merges in may be overridden
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                try:
                    key = self.construct_object(key_node, deep=True)
                    hash(key)
                except TypeError:
                    continue  # an unhashable key: SafeLoader's own error says so
                if key in seen:
                    raise ConstructorError(None, None, f"duplicate key {key!r} (first given at line {seen[key]}); "
                                           "a key may appear once in a mapping: keep one", key_node.start_mark)
                seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


def load(text: str):
    return yaml.load(text, Loader=StrictLoader)  # noqa: S506 - a SafeLoader subclass
