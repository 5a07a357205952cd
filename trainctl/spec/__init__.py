"""The job spec: the YAML file a user writes, as a pydantic v2 model (`model`), and its loader (`loader`:
one-line errors naming the file, the YAML line, the field and the fix). Pure: it reads the spec file and
nothing else.
"""
from trainctl.spec.model import (Precision, Market, Platform, LAYOUT_RE, MAX_NODES, MAX_SAMPLES, MAX_SPEC_BYTES,
                                MAX_BATCH, Strict, Architecture, ARCHITECTURES, Entrypoint, Model, Workload,
                                NodeRange, Layout, Candidates, Constraints, PATH_OFF,
                                SECRET_NAME, RESERVED_ENV, SECRET_ARN, JobSpec, json_schema)
from trainctl.spec.entrypoint_args import BUNDLED_ARGS, LM_ARGS, bundled_arg_problem
from trainctl.spec.loader import load_spec, secret_like_args  # noqa: E402 (builds on the models above)

__all__ = ['Precision', 'Market', 'Platform', 'LAYOUT_RE', 'MAX_NODES', 'MAX_SAMPLES', 'MAX_SPEC_BYTES',
           'MAX_BATCH', 'Strict', 'Architecture', 'ARCHITECTURES', 'Entrypoint', 'Model', 'Workload', 'NodeRange',
           'Layout', 'Candidates', 'Constraints', 'BUNDLED_ARGS', 'LM_ARGS', 'PATH_OFF', 'bundled_arg_problem',
           'SECRET_NAME', 'RESERVED_ENV', 'SECRET_ARN', 'JobSpec', 'json_schema', 'load_spec', 'secret_like_args']
