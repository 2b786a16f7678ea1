from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TensorDebugMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TENSOR_DEBUG_MODE_UNSPECIFIED: _ClassVar[TensorDebugMode]
    NO_TENSOR: _ClassVar[TensorDebugMode]
    CURT_HEALTH: _ClassVar[TensorDebugMode]
    CONCISE_HEALTH: _ClassVar[TensorDebugMode]
    FULL_HEALTH: _ClassVar[TensorDebugMode]
    SHAPE: _ClassVar[TensorDebugMode]
    FULL_TENSOR: _ClassVar[TensorDebugMode]
    FULL_STATS: _ClassVar[TensorDebugMode]

class DType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DTYPE_UNKNOWN: _ClassVar[DType]
    FLOAT16: _ClassVar[DType]
    FLOAT32: _ClassVar[DType]
    FLOAT64: _ClassVar[DType]
    BFLOAT16: _ClassVar[DType]
    INT8: _ClassVar[DType]
    INT16: _ClassVar[DType]
    INT32: _ClassVar[DType]
    INT64: _ClassVar[DType]
    UINT8: _ClassVar[DType]
    UINT16: _ClassVar[DType]
    UINT32: _ClassVar[DType]
    UINT64: _ClassVar[DType]
    BOOL: _ClassVar[DType]
    FLOAT8_E4M3FN: _ClassVar[DType]
    FLOAT8_E5M2: _ClassVar[DType]
TENSOR_DEBUG_MODE_UNSPECIFIED: TensorDebugMode
NO_TENSOR: TensorDebugMode
CURT_HEALTH: TensorDebugMode
CONCISE_HEALTH: TensorDebugMode
FULL_HEALTH: TensorDebugMode
SHAPE: TensorDebugMode
FULL_TENSOR: TensorDebugMode
FULL_STATS: TensorDebugMode
DTYPE_UNKNOWN: DType
FLOAT16: DType
FLOAT32: DType
FLOAT64: DType
BFLOAT16: DType
INT8: DType
INT16: DType
INT32: DType
INT64: DType
UINT8: DType
UINT16: DType
UINT32: DType
UINT64: DType
BOOL: DType
FLOAT8_E4M3FN: DType
FLOAT8_E5M2: DType

class DebugEvent(_message.Message):
    __slots__ = ("wall_time", "step", "run_key", "sequence", "debug_metadata", "source_file", "stack_frame", "debugged_graph", "graph_op_creation", "execution", "graph_execution_trace", "fused_op_replay", "fused_group_source", "run_end", "records_dropped", "watchpoint_hit", "disco_worker")
    WALL_TIME_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    RUN_KEY_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    DEBUG_METADATA_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FILE_FIELD_NUMBER: _ClassVar[int]
    STACK_FRAME_FIELD_NUMBER: _ClassVar[int]
    DEBUGGED_GRAPH_FIELD_NUMBER: _ClassVar[int]
    GRAPH_OP_CREATION_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_FIELD_NUMBER: _ClassVar[int]
    GRAPH_EXECUTION_TRACE_FIELD_NUMBER: _ClassVar[int]
    FUSED_OP_REPLAY_FIELD_NUMBER: _ClassVar[int]
    FUSED_GROUP_SOURCE_FIELD_NUMBER: _ClassVar[int]
    RUN_END_FIELD_NUMBER: _ClassVar[int]
    RECORDS_DROPPED_FIELD_NUMBER: _ClassVar[int]
    WATCHPOINT_HIT_FIELD_NUMBER: _ClassVar[int]
    DISCO_WORKER_FIELD_NUMBER: _ClassVar[int]
    wall_time: float
    step: int
    run_key: int
    sequence: int
    debug_metadata: DebugMetadata
    source_file: SourceFile
    stack_frame: StackFrame
    debugged_graph: DebuggedGraph
    graph_op_creation: GraphOpCreation
    execution: Execution
    graph_execution_trace: GraphExecutionTrace
    fused_op_replay: FusedOpReplay
    fused_group_source: FusedGroupSource
    run_end: RunEnd
    records_dropped: RecordsDropped
    watchpoint_hit: WatchpointHit
    disco_worker: DiscoWorker
    def __init__(self, wall_time: _Optional[float] = ..., step: _Optional[int] = ..., run_key: _Optional[int] = ..., sequence: _Optional[int] = ..., debug_metadata: _Optional[_Union[DebugMetadata, _Mapping]] = ..., source_file: _Optional[_Union[SourceFile, _Mapping]] = ..., stack_frame: _Optional[_Union[StackFrame, _Mapping]] = ..., debugged_graph: _Optional[_Union[DebuggedGraph, _Mapping]] = ..., graph_op_creation: _Optional[_Union[GraphOpCreation, _Mapping]] = ..., execution: _Optional[_Union[Execution, _Mapping]] = ..., graph_execution_trace: _Optional[_Union[GraphExecutionTrace, _Mapping]] = ..., fused_op_replay: _Optional[_Union[FusedOpReplay, _Mapping]] = ..., fused_group_source: _Optional[_Union[FusedGroupSource, _Mapping]] = ..., run_end: _Optional[_Union[RunEnd, _Mapping]] = ..., records_dropped: _Optional[_Union[RecordsDropped, _Mapping]] = ..., watchpoint_hit: _Optional[_Union[WatchpointHit, _Mapping]] = ..., disco_worker: _Optional[_Union[DiscoWorker, _Mapping]] = ...) -> None: ...

class DiscoWorker(_message.Message):
    __slots__ = ("job_id", "rank", "world_size")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    WORLD_SIZE_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    rank: int
    world_size: int
    def __init__(self, job_id: _Optional[str] = ..., rank: _Optional[int] = ..., world_size: _Optional[int] = ...) -> None: ...

class DebugMetadata(_message.Message):
    __slots__ = ("tvmdbg_version", "tvm_version", "run_id", "host_name", "pid", "file_version", "tensor_debug_mode", "circular_buffer_size", "argv", "run_name", "circular_buffer_bytes", "expected_nonfinite")
    TVMDBG_VERSION_FIELD_NUMBER: _ClassVar[int]
    TVM_VERSION_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    HOST_NAME_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    FILE_VERSION_FIELD_NUMBER: _ClassVar[int]
    TENSOR_DEBUG_MODE_FIELD_NUMBER: _ClassVar[int]
    CIRCULAR_BUFFER_SIZE_FIELD_NUMBER: _ClassVar[int]
    ARGV_FIELD_NUMBER: _ClassVar[int]
    RUN_NAME_FIELD_NUMBER: _ClassVar[int]
    CIRCULAR_BUFFER_BYTES_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_NONFINITE_FIELD_NUMBER: _ClassVar[int]
    tvmdbg_version: str
    tvm_version: str
    run_id: str
    host_name: str
    pid: int
    file_version: str
    tensor_debug_mode: TensorDebugMode
    circular_buffer_size: int
    argv: _containers.RepeatedScalarFieldContainer[str]
    run_name: str
    circular_buffer_bytes: int
    expected_nonfinite: str
    def __init__(self, tvmdbg_version: _Optional[str] = ..., tvm_version: _Optional[str] = ..., run_id: _Optional[str] = ..., host_name: _Optional[str] = ..., pid: _Optional[int] = ..., file_version: _Optional[str] = ..., tensor_debug_mode: _Optional[_Union[TensorDebugMode, str]] = ..., circular_buffer_size: _Optional[int] = ..., argv: _Optional[_Iterable[str]] = ..., run_name: _Optional[str] = ..., circular_buffer_bytes: _Optional[int] = ..., expected_nonfinite: _Optional[str] = ...) -> None: ...

class SourceFile(_message.Message):
    __slots__ = ("host_name", "file_path", "lines")
    HOST_NAME_FIELD_NUMBER: _ClassVar[int]
    FILE_PATH_FIELD_NUMBER: _ClassVar[int]
    LINES_FIELD_NUMBER: _ClassVar[int]
    host_name: str
    file_path: str
    lines: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, host_name: _Optional[str] = ..., file_path: _Optional[str] = ..., lines: _Optional[_Iterable[str]] = ...) -> None: ...

class StackFrame(_message.Message):
    __slots__ = ("id", "file_index", "line", "function", "file_path")
    ID_FIELD_NUMBER: _ClassVar[int]
    FILE_INDEX_FIELD_NUMBER: _ClassVar[int]
    LINE_FIELD_NUMBER: _ClassVar[int]
    FUNCTION_FIELD_NUMBER: _ClassVar[int]
    FILE_PATH_FIELD_NUMBER: _ClassVar[int]
    id: int
    file_index: int
    line: int
    function: str
    file_path: str
    def __init__(self, id: _Optional[int] = ..., file_index: _Optional[int] = ..., line: _Optional[int] = ..., function: _Optional[str] = ..., file_path: _Optional[str] = ...) -> None: ...

class CodeLocation(_message.Message):
    __slots__ = ("stack_frame_ids", "user_frame_index", "called_from_frame_index", "model_node")
    STACK_FRAME_IDS_FIELD_NUMBER: _ClassVar[int]
    USER_FRAME_INDEX_FIELD_NUMBER: _ClassVar[int]
    CALLED_FROM_FRAME_INDEX_FIELD_NUMBER: _ClassVar[int]
    MODEL_NODE_FIELD_NUMBER: _ClassVar[int]
    stack_frame_ids: _containers.RepeatedScalarFieldContainer[int]
    user_frame_index: int
    called_from_frame_index: int
    model_node: ModelNode
    def __init__(self, stack_frame_ids: _Optional[_Iterable[int]] = ..., user_frame_index: _Optional[int] = ..., called_from_frame_index: _Optional[int] = ..., model_node: _Optional[_Union[ModelNode, _Mapping]] = ...) -> None: ...

class ModelNode(_message.Message):
    __slots__ = ("format", "name", "op_type", "model_file", "module")
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OP_TYPE_FIELD_NUMBER: _ClassVar[int]
    MODEL_FILE_FIELD_NUMBER: _ClassVar[int]
    MODULE_FIELD_NUMBER: _ClassVar[int]
    format: str
    name: str
    op_type: str
    model_file: str
    module: str
    def __init__(self, format: _Optional[str] = ..., name: _Optional[str] = ..., op_type: _Optional[str] = ..., model_file: _Optional[str] = ..., module: _Optional[str] = ...) -> None: ...

class TensorSpec(_message.Message):
    __slots__ = ("dtype", "shape", "shape_expr")
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_EXPR_FIELD_NUMBER: _ClassVar[int]
    dtype: str
    shape: _containers.RepeatedScalarFieldContainer[int]
    shape_expr: str
    def __init__(self, dtype: _Optional[str] = ..., shape: _Optional[_Iterable[int]] = ..., shape_expr: _Optional[str] = ...) -> None: ...

class DebuggedGraph(_message.Message):
    __slots__ = ("graph_id", "name", "executable_id", "source_mapped", "instrumentation", "param_names", "params", "target", "code_location", "note", "outputs", "num_inputs")
    GRAPH_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    EXECUTABLE_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_MAPPED_FIELD_NUMBER: _ClassVar[int]
    INSTRUMENTATION_FIELD_NUMBER: _ClassVar[int]
    PARAM_NAMES_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    CODE_LOCATION_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    NUM_INPUTS_FIELD_NUMBER: _ClassVar[int]
    graph_id: int
    name: str
    executable_id: str
    source_mapped: bool
    instrumentation: str
    param_names: _containers.RepeatedScalarFieldContainer[str]
    params: _containers.RepeatedCompositeFieldContainer[TensorSpec]
    target: str
    code_location: CodeLocation
    note: str
    outputs: _containers.RepeatedCompositeFieldContainer[OpInput]
    num_inputs: int
    def __init__(self, graph_id: _Optional[int] = ..., name: _Optional[str] = ..., executable_id: _Optional[str] = ..., source_mapped: bool = ..., instrumentation: _Optional[str] = ..., param_names: _Optional[_Iterable[str]] = ..., params: _Optional[_Iterable[_Union[TensorSpec, _Mapping]]] = ..., target: _Optional[str] = ..., code_location: _Optional[_Union[CodeLocation, _Mapping]] = ..., note: _Optional[str] = ..., outputs: _Optional[_Iterable[_Union[OpInput, _Mapping]]] = ..., num_inputs: _Optional[int] = ...) -> None: ...

class OriginalOp(_message.Message):
    __slots__ = ("op_type", "var_name", "code_location", "rewritten_by", "node_output", "nonfinite_literal")
    OP_TYPE_FIELD_NUMBER: _ClassVar[int]
    VAR_NAME_FIELD_NUMBER: _ClassVar[int]
    CODE_LOCATION_FIELD_NUMBER: _ClassVar[int]
    REWRITTEN_BY_FIELD_NUMBER: _ClassVar[int]
    NODE_OUTPUT_FIELD_NUMBER: _ClassVar[int]
    NONFINITE_LITERAL_FIELD_NUMBER: _ClassVar[int]
    op_type: str
    var_name: str
    code_location: CodeLocation
    rewritten_by: str
    node_output: bool
    nonfinite_literal: bool
    def __init__(self, op_type: _Optional[str] = ..., var_name: _Optional[str] = ..., code_location: _Optional[_Union[CodeLocation, _Mapping]] = ..., rewritten_by: _Optional[str] = ..., node_output: bool = ..., nonfinite_literal: bool = ...) -> None: ...

class OpInput(_message.Message):
    __slots__ = ("kind", "name", "producer_op_id", "producer_output_slot", "param_index", "spec", "tuple_item", "nonfinite_literal")
    class Kind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        OTHER: _ClassVar[OpInput.Kind]
        OP_OUTPUT: _ClassVar[OpInput.Kind]
        PARAM: _ClassVar[OpInput.Kind]
        CONSTANT: _ClassVar[OpInput.Kind]
    OTHER: OpInput.Kind
    OP_OUTPUT: OpInput.Kind
    PARAM: OpInput.Kind
    CONSTANT: OpInput.Kind
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_OP_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_OUTPUT_SLOT_FIELD_NUMBER: _ClassVar[int]
    PARAM_INDEX_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    TUPLE_ITEM_FIELD_NUMBER: _ClassVar[int]
    NONFINITE_LITERAL_FIELD_NUMBER: _ClassVar[int]
    kind: OpInput.Kind
    name: str
    producer_op_id: int
    producer_output_slot: int
    param_index: int
    spec: TensorSpec
    tuple_item: int
    nonfinite_literal: bool
    def __init__(self, kind: _Optional[_Union[OpInput.Kind, str]] = ..., name: _Optional[str] = ..., producer_op_id: _Optional[int] = ..., producer_output_slot: _Optional[int] = ..., param_index: _Optional[int] = ..., spec: _Optional[_Union[TensorSpec, _Mapping]] = ..., tuple_item: _Optional[int] = ..., nonfinite_literal: bool = ...) -> None: ...

class GraphOpCreation(_message.Message):
    __slots__ = ("op_id", "graph_id", "op_name", "kernel", "call_type", "original_ops", "inputs", "outputs", "output_names", "device", "position", "code_location", "fused_members")
    OP_ID_FIELD_NUMBER: _ClassVar[int]
    GRAPH_ID_FIELD_NUMBER: _ClassVar[int]
    OP_NAME_FIELD_NUMBER: _ClassVar[int]
    KERNEL_FIELD_NUMBER: _ClassVar[int]
    CALL_TYPE_FIELD_NUMBER: _ClassVar[int]
    ORIGINAL_OPS_FIELD_NUMBER: _ClassVar[int]
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_NAMES_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    CODE_LOCATION_FIELD_NUMBER: _ClassVar[int]
    FUSED_MEMBERS_FIELD_NUMBER: _ClassVar[int]
    op_id: int
    graph_id: int
    op_name: str
    kernel: str
    call_type: str
    original_ops: _containers.RepeatedCompositeFieldContainer[OriginalOp]
    inputs: _containers.RepeatedCompositeFieldContainer[OpInput]
    outputs: _containers.RepeatedCompositeFieldContainer[TensorSpec]
    output_names: _containers.RepeatedScalarFieldContainer[str]
    device: str
    position: int
    code_location: CodeLocation
    fused_members: _containers.RepeatedCompositeFieldContainer[FusedMember]
    def __init__(self, op_id: _Optional[int] = ..., graph_id: _Optional[int] = ..., op_name: _Optional[str] = ..., kernel: _Optional[str] = ..., call_type: _Optional[str] = ..., original_ops: _Optional[_Iterable[_Union[OriginalOp, _Mapping]]] = ..., inputs: _Optional[_Iterable[_Union[OpInput, _Mapping]]] = ..., outputs: _Optional[_Iterable[_Union[TensorSpec, _Mapping]]] = ..., output_names: _Optional[_Iterable[str]] = ..., device: _Optional[str] = ..., position: _Optional[int] = ..., code_location: _Optional[_Union[CodeLocation, _Mapping]] = ..., fused_members: _Optional[_Iterable[_Union[FusedMember, _Mapping]]] = ...) -> None: ...

class FusedMember(_message.Message):
    __slots__ = ("op_type", "input_refs", "nonfinite_literal")
    OP_TYPE_FIELD_NUMBER: _ClassVar[int]
    INPUT_REFS_FIELD_NUMBER: _ClassVar[int]
    NONFINITE_LITERAL_FIELD_NUMBER: _ClassVar[int]
    op_type: str
    input_refs: _containers.RepeatedScalarFieldContainer[int]
    nonfinite_literal: bool
    def __init__(self, op_type: _Optional[str] = ..., input_refs: _Optional[_Iterable[int]] = ..., nonfinite_literal: bool = ...) -> None: ...

class TensorValue(_message.Message):
    __slots__ = ("dtype", "shape", "content", "truncated")
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    dtype: str
    shape: _containers.RepeatedScalarFieldContainer[int]
    content: bytes
    truncated: bool
    def __init__(self, dtype: _Optional[str] = ..., shape: _Optional[_Iterable[int]] = ..., content: _Optional[bytes] = ..., truncated: bool = ...) -> None: ...

class TensorSummary(_message.Message):
    __slots__ = ("debug_values", "tensor_value", "dtype", "shape", "items", "summarized_in_execution")
    DEBUG_VALUES_FIELD_NUMBER: _ClassVar[int]
    TENSOR_VALUE_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    SUMMARIZED_IN_EXECUTION_FIELD_NUMBER: _ClassVar[int]
    debug_values: _containers.RepeatedScalarFieldContainer[float]
    tensor_value: TensorValue
    dtype: str
    shape: _containers.RepeatedScalarFieldContainer[int]
    items: _containers.RepeatedCompositeFieldContainer[TensorSummary]
    summarized_in_execution: int
    def __init__(self, debug_values: _Optional[_Iterable[float]] = ..., tensor_value: _Optional[_Union[TensorValue, _Mapping]] = ..., dtype: _Optional[str] = ..., shape: _Optional[_Iterable[int]] = ..., items: _Optional[_Iterable[_Union[TensorSummary, _Mapping]]] = ..., summarized_in_execution: _Optional[int] = ...) -> None: ...

class Execution(_message.Message):
    __slots__ = ("index", "function_name", "graph_id", "tensor_debug_mode", "inputs", "outputs", "duration_us", "code_location", "num_traces", "error", "executable_id", "record_error", "call_number", "vm")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    FUNCTION_NAME_FIELD_NUMBER: _ClassVar[int]
    GRAPH_ID_FIELD_NUMBER: _ClassVar[int]
    TENSOR_DEBUG_MODE_FIELD_NUMBER: _ClassVar[int]
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    DURATION_US_FIELD_NUMBER: _ClassVar[int]
    CODE_LOCATION_FIELD_NUMBER: _ClassVar[int]
    NUM_TRACES_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    EXECUTABLE_ID_FIELD_NUMBER: _ClassVar[int]
    RECORD_ERROR_FIELD_NUMBER: _ClassVar[int]
    CALL_NUMBER_FIELD_NUMBER: _ClassVar[int]
    VM_FIELD_NUMBER: _ClassVar[int]
    index: int
    function_name: str
    graph_id: int
    tensor_debug_mode: TensorDebugMode
    inputs: _containers.RepeatedCompositeFieldContainer[TensorSummary]
    outputs: _containers.RepeatedCompositeFieldContainer[TensorSummary]
    duration_us: float
    code_location: CodeLocation
    num_traces: int
    error: str
    executable_id: str
    record_error: str
    call_number: int
    vm: int
    def __init__(self, index: _Optional[int] = ..., function_name: _Optional[str] = ..., graph_id: _Optional[int] = ..., tensor_debug_mode: _Optional[_Union[TensorDebugMode, str]] = ..., inputs: _Optional[_Iterable[_Union[TensorSummary, _Mapping]]] = ..., outputs: _Optional[_Iterable[_Union[TensorSummary, _Mapping]]] = ..., duration_us: _Optional[float] = ..., code_location: _Optional[_Union[CodeLocation, _Mapping]] = ..., num_traces: _Optional[int] = ..., error: _Optional[str] = ..., executable_id: _Optional[str] = ..., record_error: _Optional[str] = ..., call_number: _Optional[int] = ..., vm: _Optional[int] = ...) -> None: ...

class GraphExecutionTrace(_message.Message):
    __slots__ = ("op_id", "output_slot", "execution_index", "op_name", "kernel", "graph_id", "tensor_debug_mode", "debug_values", "tensor_value", "device", "duration_us", "error", "index", "dtype", "shape", "inner_nonfinite")
    OP_ID_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_SLOT_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_INDEX_FIELD_NUMBER: _ClassVar[int]
    OP_NAME_FIELD_NUMBER: _ClassVar[int]
    KERNEL_FIELD_NUMBER: _ClassVar[int]
    GRAPH_ID_FIELD_NUMBER: _ClassVar[int]
    TENSOR_DEBUG_MODE_FIELD_NUMBER: _ClassVar[int]
    DEBUG_VALUES_FIELD_NUMBER: _ClassVar[int]
    TENSOR_VALUE_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    DURATION_US_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    INNER_NONFINITE_FIELD_NUMBER: _ClassVar[int]
    op_id: int
    output_slot: int
    execution_index: int
    op_name: str
    kernel: str
    graph_id: int
    tensor_debug_mode: TensorDebugMode
    debug_values: _containers.RepeatedScalarFieldContainer[float]
    tensor_value: TensorValue
    device: str
    duration_us: float
    error: str
    index: int
    dtype: str
    shape: _containers.RepeatedScalarFieldContainer[int]
    inner_nonfinite: _containers.RepeatedCompositeFieldContainer[InnerNonfinite]
    def __init__(self, op_id: _Optional[int] = ..., output_slot: _Optional[int] = ..., execution_index: _Optional[int] = ..., op_name: _Optional[str] = ..., kernel: _Optional[str] = ..., graph_id: _Optional[int] = ..., tensor_debug_mode: _Optional[_Union[TensorDebugMode, str]] = ..., debug_values: _Optional[_Iterable[float]] = ..., tensor_value: _Optional[_Union[TensorValue, _Mapping]] = ..., device: _Optional[str] = ..., duration_us: _Optional[float] = ..., error: _Optional[str] = ..., index: _Optional[int] = ..., dtype: _Optional[str] = ..., shape: _Optional[_Iterable[int]] = ..., inner_nonfinite: _Optional[_Iterable[_Union[InnerNonfinite, _Mapping]]] = ...) -> None: ...

class InnerNonfinite(_message.Message):
    __slots__ = ("index", "op_type", "var_name", "code_location", "nan", "neg_inf", "pos_inf")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    OP_TYPE_FIELD_NUMBER: _ClassVar[int]
    VAR_NAME_FIELD_NUMBER: _ClassVar[int]
    CODE_LOCATION_FIELD_NUMBER: _ClassVar[int]
    NAN_FIELD_NUMBER: _ClassVar[int]
    NEG_INF_FIELD_NUMBER: _ClassVar[int]
    POS_INF_FIELD_NUMBER: _ClassVar[int]
    index: int
    op_type: str
    var_name: str
    code_location: CodeLocation
    nan: int
    neg_inf: int
    pos_inf: int
    def __init__(self, index: _Optional[int] = ..., op_type: _Optional[str] = ..., var_name: _Optional[str] = ..., code_location: _Optional[_Union[CodeLocation, _Mapping]] = ..., nan: _Optional[int] = ..., neg_inf: _Optional[int] = ..., pos_inf: _Optional[int] = ...) -> None: ...

class FusedOpReplay(_message.Message):
    __slots__ = ("execution_index", "op_id", "graph_id", "kernel", "trigger", "ops", "first_nonfinite_op", "inputs", "error", "matches_kernel", "note")
    EXECUTION_INDEX_FIELD_NUMBER: _ClassVar[int]
    OP_ID_FIELD_NUMBER: _ClassVar[int]
    GRAPH_ID_FIELD_NUMBER: _ClassVar[int]
    KERNEL_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_FIELD_NUMBER: _ClassVar[int]
    OPS_FIELD_NUMBER: _ClassVar[int]
    FIRST_NONFINITE_OP_FIELD_NUMBER: _ClassVar[int]
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    MATCHES_KERNEL_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    execution_index: int
    op_id: int
    graph_id: int
    kernel: str
    trigger: str
    ops: _containers.RepeatedCompositeFieldContainer[InnerOpResult]
    first_nonfinite_op: int
    inputs: _containers.RepeatedCompositeFieldContainer[TensorSummary]
    error: str
    matches_kernel: bool
    note: str
    def __init__(self, execution_index: _Optional[int] = ..., op_id: _Optional[int] = ..., graph_id: _Optional[int] = ..., kernel: _Optional[str] = ..., trigger: _Optional[str] = ..., ops: _Optional[_Iterable[_Union[InnerOpResult, _Mapping]]] = ..., first_nonfinite_op: _Optional[int] = ..., inputs: _Optional[_Iterable[_Union[TensorSummary, _Mapping]]] = ..., error: _Optional[str] = ..., matches_kernel: bool = ..., note: _Optional[str] = ...) -> None: ...

class InnerOpResult(_message.Message):
    __slots__ = ("index", "op_type", "var_name", "code_location", "prim_func", "input_refs", "outputs", "origin")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    OP_TYPE_FIELD_NUMBER: _ClassVar[int]
    VAR_NAME_FIELD_NUMBER: _ClassVar[int]
    CODE_LOCATION_FIELD_NUMBER: _ClassVar[int]
    PRIM_FUNC_FIELD_NUMBER: _ClassVar[int]
    INPUT_REFS_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    index: int
    op_type: str
    var_name: str
    code_location: CodeLocation
    prim_func: str
    input_refs: _containers.RepeatedScalarFieldContainer[int]
    outputs: _containers.RepeatedCompositeFieldContainer[TensorSummary]
    origin: bool
    def __init__(self, index: _Optional[int] = ..., op_type: _Optional[str] = ..., var_name: _Optional[str] = ..., code_location: _Optional[_Union[CodeLocation, _Mapping]] = ..., prim_func: _Optional[str] = ..., input_refs: _Optional[_Iterable[int]] = ..., outputs: _Optional[_Iterable[_Union[TensorSummary, _Mapping]]] = ..., origin: bool = ...) -> None: ...

class FusedGroupSource(_message.Message):
    __slots__ = ("op_id", "kernel", "module_script", "tvm_version", "ops", "num_inputs", "constants")
    OP_ID_FIELD_NUMBER: _ClassVar[int]
    KERNEL_FIELD_NUMBER: _ClassVar[int]
    MODULE_SCRIPT_FIELD_NUMBER: _ClassVar[int]
    TVM_VERSION_FIELD_NUMBER: _ClassVar[int]
    OPS_FIELD_NUMBER: _ClassVar[int]
    NUM_INPUTS_FIELD_NUMBER: _ClassVar[int]
    CONSTANTS_FIELD_NUMBER: _ClassVar[int]
    op_id: int
    kernel: str
    module_script: str
    tvm_version: str
    ops: _containers.RepeatedCompositeFieldContainer[InnerOpResult]
    num_inputs: int
    constants: _containers.RepeatedCompositeFieldContainer[TensorValue]
    def __init__(self, op_id: _Optional[int] = ..., kernel: _Optional[str] = ..., module_script: _Optional[str] = ..., tvm_version: _Optional[str] = ..., ops: _Optional[_Iterable[_Union[InnerOpResult, _Mapping]]] = ..., num_inputs: _Optional[int] = ..., constants: _Optional[_Iterable[_Union[TensorValue, _Mapping]]] = ...) -> None: ...

class WatchpointHit(_message.Message):
    __slots__ = ("watchpoint_id", "condition", "description", "op_id", "graph_id", "op_name", "kernel", "output_slot", "execution_index", "detail", "paused", "trace")
    WATCHPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    CONDITION_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    OP_ID_FIELD_NUMBER: _ClassVar[int]
    GRAPH_ID_FIELD_NUMBER: _ClassVar[int]
    OP_NAME_FIELD_NUMBER: _ClassVar[int]
    KERNEL_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_SLOT_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_INDEX_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    TRACE_FIELD_NUMBER: _ClassVar[int]
    watchpoint_id: int
    condition: str
    description: str
    op_id: int
    graph_id: int
    op_name: str
    kernel: str
    output_slot: int
    execution_index: int
    detail: str
    paused: bool
    trace: GraphExecutionTrace
    def __init__(self, watchpoint_id: _Optional[int] = ..., condition: _Optional[str] = ..., description: _Optional[str] = ..., op_id: _Optional[int] = ..., graph_id: _Optional[int] = ..., op_name: _Optional[str] = ..., kernel: _Optional[str] = ..., output_slot: _Optional[int] = ..., execution_index: _Optional[int] = ..., detail: _Optional[str] = ..., paused: bool = ..., trace: _Optional[_Union[GraphExecutionTrace, _Mapping]] = ...) -> None: ...

class RunEnd(_message.Message):
    __slots__ = ("how", "reason", "num_executions", "num_traces", "first_missing_execution", "first_missing_trace", "num_stack_frames", "num_source_files", "nonfinite_executions", "unchecked_executions", "dropped_executions", "dropped_traces", "records", "unrecorded_executions", "first_unrecorded")
    class How(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        HOW_UNSPECIFIED: _ClassVar[RunEnd.How]
        CLOSED: _ClassVar[RunEnd.How]
        ABORTED: _ClassVar[RunEnd.How]
    HOW_UNSPECIFIED: RunEnd.How
    CLOSED: RunEnd.How
    ABORTED: RunEnd.How
    class RecordsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    HOW_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    NUM_EXECUTIONS_FIELD_NUMBER: _ClassVar[int]
    NUM_TRACES_FIELD_NUMBER: _ClassVar[int]
    FIRST_MISSING_EXECUTION_FIELD_NUMBER: _ClassVar[int]
    FIRST_MISSING_TRACE_FIELD_NUMBER: _ClassVar[int]
    NUM_STACK_FRAMES_FIELD_NUMBER: _ClassVar[int]
    NUM_SOURCE_FILES_FIELD_NUMBER: _ClassVar[int]
    NONFINITE_EXECUTIONS_FIELD_NUMBER: _ClassVar[int]
    UNCHECKED_EXECUTIONS_FIELD_NUMBER: _ClassVar[int]
    DROPPED_EXECUTIONS_FIELD_NUMBER: _ClassVar[int]
    DROPPED_TRACES_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    UNRECORDED_EXECUTIONS_FIELD_NUMBER: _ClassVar[int]
    FIRST_UNRECORDED_FIELD_NUMBER: _ClassVar[int]
    how: RunEnd.How
    reason: str
    num_executions: int
    num_traces: int
    first_missing_execution: int
    first_missing_trace: int
    num_stack_frames: int
    num_source_files: int
    nonfinite_executions: int
    unchecked_executions: int
    dropped_executions: int
    dropped_traces: int
    records: _containers.ScalarMap[str, int]
    unrecorded_executions: int
    first_unrecorded: str
    def __init__(self, how: _Optional[_Union[RunEnd.How, str]] = ..., reason: _Optional[str] = ..., num_executions: _Optional[int] = ..., num_traces: _Optional[int] = ..., first_missing_execution: _Optional[int] = ..., first_missing_trace: _Optional[int] = ..., num_stack_frames: _Optional[int] = ..., num_source_files: _Optional[int] = ..., nonfinite_executions: _Optional[int] = ..., unchecked_executions: _Optional[int] = ..., dropped_executions: _Optional[int] = ..., dropped_traces: _Optional[int] = ..., records: _Optional[_Mapping[str, int]] = ..., unrecorded_executions: _Optional[int] = ..., first_unrecorded: _Optional[str] = ...) -> None: ...

class RecordsDropped(_message.Message):
    __slots__ = ("first_sequence", "count")
    FIRST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    first_sequence: int
    count: int
    def __init__(self, first_sequence: _Optional[int] = ..., count: _Optional[int] = ...) -> None: ...
