"""05: one DiT block of Pixal3D's sparse-structure flow model: the other graph RFD 1129's decision names.

`model` loads the flow model (a Pixal3D checkout or the stand-in), tries both exporters and patches RoPE to
real arithmetic; `variants` builds the device layout and the exact changes, and says what each leaves
outside DEVICE_OPS.
"""

from .model import (FLOW_CONFIG, CPU_BACKEND, GLOBAL_TOKENS, TIMESTEP_SCALE, INPUT_NAMES, OUTPUT_NAMES, FlowLoadError,
                    FlowSource, randomise, load_flow_model, source_of, parameter_count, condition_channels,
                    example_inputs, flat, FlatInputs, ExportAttempt, EXPORTERS, try_exports, real_rope,
                    attention_backend, max_abs_diff, forward)
from .variants import (DeviceLayout, to_device_layout, device_layout, input_ranks, HostTimestep,
                       host_timestep_features, MatMulRMSNorm, CHANGES, Variant, exact_variants, export_variant,
                       op_origins, op_table, RFD_1154, VariantResult, evaluate, outside_table)

__all__ = [
    "FLOW_CONFIG", "CPU_BACKEND", "GLOBAL_TOKENS", "TIMESTEP_SCALE", "INPUT_NAMES", "OUTPUT_NAMES",
    "FlowLoadError", "FlowSource", "randomise", "load_flow_model", "source_of", "parameter_count",
    "condition_channels", "example_inputs", "flat", "FlatInputs", "ExportAttempt", "EXPORTERS", "try_exports",
    "real_rope", "attention_backend", "max_abs_diff", "forward", "DeviceLayout", "to_device_layout",
    "device_layout", "input_ranks", "HostTimestep", "host_timestep_features", "MatMulRMSNorm", "CHANGES",
    "Variant", "exact_variants", "export_variant", "op_origins", "op_table", "RFD_1154", "VariantResult",
    "evaluate", "outside_table",
]
