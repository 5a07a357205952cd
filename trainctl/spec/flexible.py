"""Flexible layouts: N nodes, each of any of several instance types that carry the same accelerators.

Data-parallel training needs identical accelerators, not identical instances: g5.xlarge ... g5.16xlarge all
carry one A10G and differ in vCPUs, memory and network. A flexible layout names such a set either by its
shape, `g5:1xA10G` (every size of the family with one A10G), or by a list, `g5.2xlarge|g5.4xlarge`. Pure:
the catalog is passed in.
"""
from __future__ import annotations

import re

SHAPE_RE = re.compile(r"^(?P<family>[a-z0-9-]+):(?P<per>\d{1,3})x(?P<accelerator>[A-Za-z0-9-]+)$")
LIST_SEPARATOR = "|"
MIN_MEMBERS = 2  # one type is a fixed layout


def is_flexible(name: str) -> bool:
    return LIST_SEPARATOR in name or SHAPE_RE.match(name) is not None


def shape_name(inst) -> str:
    """'g5:1xA10G': the family, and the accelerators per node."""
    return f"{inst.family}:{inst.accelerator_count}x{inst.accelerator.key}"


def members(catalog, name: str) -> tuple[str, ...]:
    """The instance types a flexible layout may get, fewest vCPUs first. ValueError (with the fix) when the name
    is no flexible layout, names an unknown type, or mixes accelerators."""
    shape = SHAPE_RE.match(name)
    if shape:
        types = [i.name for i in catalog.instances.values()
                 if i.family == shape["family"] and str(i.accelerator_count) == shape["per"].lstrip("0")
                 and i.accelerator.key.lower() == shape["accelerator"].lower()]
        if len(types) < MIN_MEMBERS:
            raise ValueError(f"flexible layout {name!r}: the catalog has {len(types)} {shape['family']} size(s) "
                             f"with {shape['per']} {shape['accelerator']}; a flexible layout needs at least "
                             f"{MIN_MEMBERS} (`trainctl catalog` lists them)")
    else:
        types = [t.removeprefix("ml.") for t in name.split(LIST_SEPARATOR)]
        unknown = [t for t in types if t not in catalog.instances]
        if unknown:
            raise ValueError(f"flexible layout {name!r}: unknown instance type {unknown[0]!r}; `trainctl catalog` "
                             "lists the known types")
        if len(set(types)) < MIN_MEMBERS:
            raise ValueError(f"flexible layout {name!r}: list at least {MIN_MEMBERS} different types")
        shapes = {(catalog.instances[t].accelerator.key, catalog.instances[t].accelerator_count) for t in types}
        if len(shapes) > 1:
            raise ValueError(f"flexible layout {name!r}: its types carry different accelerators "
                             f"({', '.join(f'{n}x {k}' for k, n in sorted(shapes))}); data-parallel nodes need "
                             "the same accelerators")
    return tuple(sorted(set(types), key=lambda t: (catalog.instances[t].vcpus, t)))


def family_groups(catalog, families) -> list[str]:
    """Every flexible layout the families allow by default: sizes of one family that share the accelerator and
    its count per node (g5:1xA10G = g5.xlarge ... g5.16xlarge; g5:4xA10G = g5.12xlarge, g5.24xlarge)."""
    shapes: dict[str, int] = {}
    for inst in catalog.instances.values():
        if inst.family in families:
            shapes[shape_name(inst)] = shapes.get(shape_name(inst), 0) + 1
    return sorted(name for name, n in shapes.items() if n >= MIN_MEMBERS)


def label(catalog, types: tuple[str, ...] | list[str]) -> str:
    """The name a plan shows for a set of types: its shape when the set is exactly the family's sizes of that
    accelerator, else the list."""
    first = catalog.instances[types[0]]
    shape = shape_name(first)
    try:
        if set(members(catalog, shape)) == set(types):
            return shape
    except ValueError:
        pass
    return LIST_SEPARATOR.join(types)
