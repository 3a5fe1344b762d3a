/*
 * neuronsim/isa.h -- the neuronsim instruction set: opcodes, operands,
 * programs, the binary (.nsp) and text (.nsasm) forms, the validator and the
 * program builder.
 *
 * The instruction set is declared once in include/neuronsim/isa.def (and its
 * companion tables isa_dtype.def, isa_act.def, isa_alu.def, isa_targets.def,
 * isa_errors.def, and the operand formats in isa/isa_formats.def, read
 * through isa_op_field); everything below that enumerates
 * instructions, dtypes, operators or errors is expanded from those tables.
 *
 * Conventions: action functions return an isa_status (ISA_OK = 0, else an
 * ISA_E_* code) and fill an optional isa_diag with a message naming what was
 * wrong; predicates return bool.  Nothing here prints, exits or aborts.
 */
#ifndef NEURONSIM_ISA_H
#define NEURONSIM_ISA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What this header declares is the library's exported API: libneuronsim.so
 * is built with hidden visibility, and only declarations seen between this
 * push and its pop are exported (internal headers declare after the pop). */
#pragma GCC visibility push(default)

/* ---------------------------------------------------------------- limits */

#define ISA_NUM_PARTITIONS   128u
#define ISA_MAX_DIMS         4u        /* free dims of an access pattern   */
#define ISA_QUADRANT         32u       /* partitions a VectorE reshape bank serves */
#define ISA_PMAP_KEEP        255u      /* partition-map entry: leave the output partition */
#define ISA_MAX_RANK         8u        /* tensor table shapes               */
#define ISA_MAX_NAME         63u       /* tensor / descriptor name length   */
#define ISA_MAX_TENSORS      65536u
#define ISA_MAX_DMA_DESCS    (1u << 20)
#define ISA_MAX_STREAM_LEN   (1u << 24)
#define ISA_MAX_SEMAPHORES   256u
#define ISA_MAX_CONST_BYTES  (1ull << 30)
#define ISA_MAX_TENSOR_BYTES (1ull << 40)  /* larger than any HBM we model */
#define ISA_NUM_DMA_QUEUES   16u
#define ISA_SEM_NONE         0xffffffffu

#define ISA_FORMAT_VERSION_MAJOR 2u   /* 2: load_stationary / multiply_moving gained an optional scale */
#define ISA_FORMAT_VERSION_MINOR 2u   /* 2.1: an indexed DMA's oob_skip (bit 7 of its mode); 2.2: branch, fence */
#define ISA_MAGIC "NSIMPROG"             /* 8 bytes, first in a .nsp file */

/* --------------------------------------------------------------- engines */

typedef enum isa_engine {
	ISA_ENGINE_TENSOR = 0,
	ISA_ENGINE_VECTOR,
	ISA_ENGINE_SCALAR,
	ISA_ENGINE_GPSIMD,
	ISA_ENGINE_SYNC,
	ISA_NUM_ENGINES
} isa_engine;

#define ISA_EM_TENSOR (1u << ISA_ENGINE_TENSOR)
#define ISA_EM_VECTOR (1u << ISA_ENGINE_VECTOR)
#define ISA_EM_SCALAR (1u << ISA_ENGINE_SCALAR)
#define ISA_EM_GPSIMD (1u << ISA_ENGINE_GPSIMD)
#define ISA_EM_SYNC   (1u << ISA_ENGINE_SYNC)
#define ISA_EM_ALL    ((1u << ISA_NUM_ENGINES) - 1u)

/* ---------------------------------------------------------------- tables */

typedef enum isa_opcode {
#define ISA_OP(name, code, engines, format, cost, synopsis) ISA_OP_##name,
#include "isa.def"
#undef ISA_OP
	ISA_NUM_OPS
} isa_opcode;

/* cost classes (isa_cost.def): the device model's cost-function slots */
typedef enum isa_cost_class {
#define ISA_COST(name, formula) ISA_COST_##name,
#include "isa_cost.def"
#undef ISA_COST
	ISA_NUM_COST_CLASSES
} isa_cost_class;

typedef enum isa_dtype {
	ISA_DT_INVALID = 0,
#define ISA_DTYPE(name, code, bytes, cls) ISA_DT_##name,
#include "isa_dtype.def"
#undef ISA_DTYPE
	ISA_NUM_DTYPES
} isa_dtype;

typedef enum isa_dclass {
	ISA_DC_FLOAT = 1,
	ISA_DC_INT,
	ISA_DC_UINT,
	ISA_DC_BOOL,
	ISA_DC_MX        /* four packed MX values per element (isa_dtype.def) */
} isa_dclass;

typedef enum isa_act {
#define ISA_ACT(name, code, synopsis) ISA_ACT_##name,
#include "isa_act.def"
#undef ISA_ACT
	ISA_NUM_ACTS
} isa_act;

/* where an ALU operator may be used (isa_alu.def "uses") */
#define ISA_AU_TT  0x01u
#define ISA_AU_TS  0x02u
#define ISA_AU_RED 0x04u
#define ISA_AU_CMP 0x08u
#define ISA_AU_INT 0x10u

typedef enum isa_alu {
#define ISA_ALU(name, code, uses, synopsis) ISA_ALU_##name,
#include "isa_alu.def"
#undef ISA_ALU
	ISA_NUM_ALUS
} isa_alu;

typedef enum isa_target {
	ISA_TARGET_INVALID = 0,
#define ISA_TARGET(name, code, core, ver, sbuf, psum, banks, mmn32, mmn16, dr) ISA_TARGET_##name,
#include "isa_targets.def"
#undef ISA_TARGET
	ISA_NUM_TARGETS
} isa_target;

/* the features a core generation brings (isa_features.def) */
typedef enum isa_feature {
#define ISA_FEATURE(name, first, what) ISA_FEAT_##name,
#include "isa_features.def"
#undef ISA_FEATURE
	ISA_NUM_FEATURES
} isa_feature;

typedef enum isa_status {
	ISA_OK = 0,
#define ISA_ERR(name, summary) ISA_E_##name,
#include "isa_errors.def"
#undef ISA_ERR
	ISA_NUM_STATUS
} isa_status;

typedef enum isa_perf_mode {
	ISA_PERF_NONE = 0,
	ISA_PERF_DOUBLE_ROW,     /* fp8 2x (NeuronCore-v3 and later) */
	ISA_NUM_PERF_MODES
} isa_perf_mode;

typedef enum isa_semop {
	ISA_SEMOP_ADD = 0,
	ISA_SEMOP_SUB,
	ISA_SEMOP_SET,
	ISA_NUM_SEMOPS
} isa_semop;

typedef enum isa_space {
	ISA_SPACE_NONE = 0,
	ISA_SPACE_HBM,
	ISA_SPACE_SBUF,
	ISA_SPACE_PSUM,
	ISA_NUM_SPACES
} isa_space;

/* instruction flag bits (isa_instr.flags) */
#define ISA_FLAG_ACCUMULATE 0x0001u  /* multiply_moving: add into PSUM      */
#define ISA_FLAG_REVERSE0   0x0002u  /* tensor_scalar: scalar0 <op0> x      */
#define ISA_FLAG_REVERSE1   0x0004u  /* tensor_scalar: scalar1 <op1> y      */
#define ISA_FLAG_NEGATE     0x0008u  /* tensor_reduce: negate the result    */
/* sem_signal: update the semaphore of the paired core (LNC=2: the other
 * physical core of this logical core); dma_copy: the descriptor writes the
 * paired core's SBUF.  v3+; a fault when the execution has no paired core. */
#define ISA_FLAG_PEER       0x0010u
/* sem_signal: update the semaphore of core `rank` of this execution (a
 * collective's ranks: nsim_execute_multi's runs); a fault when there is no
 * such run */
#define ISA_FLAG_REMOTE     0x0020u
/* topk: the k smallest instead of the largest; the k in selection order,
 * not ranked (CPU topk's sorted=False); the whole row sorted as CPU's
 * unstable sort does (k = n; descending, ascending with smallest) */
#define ISA_FLAG_SMALLEST   0x0040u
#define ISA_FLAG_UNSORTED   0x0080u
#define ISA_FLAG_SORT       0x0100u
/* topk: one row spans the operands' partitions (src's P x F elements in
 * partition order; dst / indices hold the k likewise), for rows longer
 * than a partition holds */
#define ISA_FLAG_SPAN       0x0200u

/* ------------------------------------------------------------- operands */

/*
 * An access pattern.  SBUF/PSUM: partitions [start, start + nparts), byte
 * `offset` inside each partition, then up to 4 free dims (stride, size) in
 * elements, outermost first.  HBM: tensor table entry `tensor`, byte `offset`
 * in it, `nparts` rows `pstride` elements apart, then the free dims.
 */
typedef struct isa_ap {
	uint8_t  space;               /* isa_space */
	uint8_t  dtype;               /* isa_dtype */
	uint8_t  start;               /* first partition (SBUF/PSUM) */
	uint8_t  ndims;               /* 1..ISA_MAX_DIMS */
	uint32_t nparts;              /* partitions (SBUF/PSUM) or rows (HBM) */
	uint32_t tensor;              /* HBM: tensor table index */
	int64_t  pstride;             /* HBM: elements between rows */
	uint64_t offset;              /* bytes */
	int32_t  stride[ISA_MAX_DIMS];
	uint32_t size[ISA_MAX_DIMS];
} isa_ap;

/* typed 32-bit immediate */
typedef enum isa_imm_kind { ISA_IMM_I32 = 0, ISA_IMM_F32 = 1 } isa_imm_kind;
typedef struct isa_imm {
	uint8_t  kind;                /* isa_imm_kind */
	uint32_t bits;                /* int32 value or fp32 bit pattern */
} isa_imm;

/* access-pattern slots of isa_instr.ap; a format says what each one holds */
typedef enum isa_ap_slot {
	ISA_AP_DST = 0,
	ISA_AP_SRC,
	ISA_AP_SRC1,
	ISA_AP_SRC2,
	ISA_AP_AUX,
	ISA_MAX_AP
} isa_ap_slot;

typedef struct isa_instr {
	uint8_t  opcode;              /* isa_opcode */
	uint8_t  ap_mask;             /* bit i set: ap[i] holds an operand */
	uint8_t  e[2];                /* enumerated fields (act, alu, perf, ...) */
	uint16_t flags;               /* ISA_FLAG_* */
	uint8_t  nivec;               /* entries used in ivec */
	uint8_t  pad_;
	uint32_t u[4];                /* unsigned fields (sem, value, queue, ...) */
	isa_imm  imm[3];              /* immediates */
	int32_t  ivec[ISA_MAX_DIMS];  /* per-free-dim integers (iota, affine_select) */
	isa_ap   ap[ISA_MAX_AP];
	uint8_t  pmap[ISA_QUADRANT];  /* partition map (nc_stream_shuffle's mask):
	                                 output i of each quadrant <- input pmap[i],
	                                 ISA_PMAP_KEEP leaves it */
} isa_instr;

/* ------------------------------------------------------------- programs */

typedef enum isa_tensor_kind {
	ISA_TK_INPUT = 0,
	ISA_TK_OUTPUT,
	ISA_TK_INTERNAL,              /* scratch HBM owned by the program */
	ISA_TK_CONST,                 /* data in the program's constants   */
	ISA_NUM_TENSOR_KINDS
} isa_tensor_kind;

typedef struct isa_tensor {
	char     name[ISA_MAX_NAME + 1];
	uint8_t  dtype;
	uint8_t  kind;                /* isa_tensor_kind */
	uint8_t  rank;                /* 0..ISA_MAX_RANK (0 = scalar) */
	uint64_t shape[ISA_MAX_RANK];
	uint64_t offset;              /* INTERNAL: byte offset in scratch;
	                                 CONST: byte offset in constants; else 0 */
} isa_tensor;

/* indirect DMA: which side is addressed through the index operand */
typedef enum isa_dma_mode {
	ISA_DMA_DIRECT = 0,
	ISA_DMA_GATHER,               /* src row = index[p]     */
	ISA_DMA_SCATTER,              /* dst row = index[p]     */
	ISA_DMA_SCATTER_ADD,          /* dst row index[p] += src row p (read-modify-write,
	                                 NKI atomic_rmw; rows in order, so repeats add up) */
	ISA_DMA_TRANSPOSE,            /* dst[p][j*I + i] = src[i][j*P + p], I src rows, P dst
	                                 partitions, the outer free elements j kept (J = 1:
	                                 dst[i][j] = src[j][i]) (NKI dma_transpose; 2-byte
	                                 dtypes, dst in SBUF, NeuronCore-v3 and later) */
	ISA_DMA_ADD,                  /* dst += src element by element, shapes as a direct copy's
	                                 without reshaping (the DMA engines' compute, read-modify-
	                                 write: NKI dma_compute / dma_copy dst_rmw_op=add) */
	ISA_DMA_GATHER_ADD,           /* dst row p += src row index[p] (dma_compute's gather
	                                 read-modify-write) */
	ISA_NUM_DMA_MODES
} isa_dma_mode;


typedef struct isa_dma_desc {
	char     name[ISA_MAX_NAME + 1];
	uint8_t  mode;                /* isa_dma_mode */
	uint8_t  oob_skip;            /* indexed modes: an index outside the indexed tensor's
	                                 rows drops that row's transfer instead of faulting
	                                 (NKI oob_mode.skip); binary: bit 7 of the mode byte */
	isa_ap   dst;
	isa_ap   src;
	isa_ap   index;               /* GATHER/SCATTER: [P,1] int32/uint32 in SBUF */
} isa_dma_desc;

typedef struct isa_program {
	uint8_t       target;         /* isa_target */
	uint32_t      num_semaphores;
	uint64_t      scratch_bytes;  /* HBM scratch for INTERNAL tensors */
	isa_tensor   *tensors;
	uint32_t      n_tensors, cap_tensors;
	uint8_t      *consts;
	uint64_t      consts_size, cap_consts;
	isa_dma_desc *dma;
	uint32_t      n_dma, cap_dma;
	isa_instr    *stream[ISA_NUM_ENGINES];
	uint32_t      n_instr[ISA_NUM_ENGINES];
	uint32_t      cap_instr[ISA_NUM_ENGINES];
} isa_program;

/* ----------------------------------------------------------- diagnostics */

typedef struct isa_diag {
	isa_status code;
	int        engine;            /* isa_engine, or -1 */
	int64_t    index;             /* instruction / table index, or -1 */
	int        line;              /* .nsasm line, or 0 */
	char       field[32];         /* offending field, or "" */
	char       msg[320];          /* full message */
} isa_diag;

/* ----------------------------------------------------------------- info */

typedef struct isa_op_info {
	const char *name;
	uint8_t     code;
	uint8_t     engines;          /* ISA_EM_* */
	uint8_t     format;           /* isa_format index */
	uint8_t     cost;             /* isa_cost_class */
	const char *synopsis;
} isa_op_info;

typedef struct isa_target_info {
	const char *name;
	uint8_t     code;
	const char *core;             /* "NeuronCore-v3" */
	unsigned    core_version;     /* 3 for NeuronCore-v3 */
	uint32_t    sbuf_partition_bytes;
	uint32_t    psum_partition_bytes;
	uint32_t    psum_banks;
	uint32_t    mm_max_n_fp32;
	uint32_t    mm_max_n_16bit;
	bool        has_double_row;
} isa_target_info;

extern const isa_op_info isa_ops[ISA_NUM_OPS];

const char *isa_engine_name(int engine);          /* "tensor", ... or NULL */
int         isa_engine_from_name(const char *s);  /* -1 if unknown */
const char *isa_op_name(int op);
int         isa_op_from_name(const char *s);
int         isa_op_from_code(unsigned code);      /* -1 if unknown */
const char *isa_dtype_name(int dtype);
int         isa_dtype_from_name(const char *s);   /* ISA_DT_INVALID if unknown */
int         isa_dtype_from_code(unsigned code);
unsigned    isa_dtype_code(int dtype);
unsigned    isa_dtype_size(int dtype);            /* bytes; 0 if invalid */
int         isa_dtype_class(int dtype);
bool        isa_dtype_is_float(int dtype);
bool        isa_dtype_is_integer(int dtype);      /* int, uint or bool */
bool        isa_dtype_is_mx(int dtype);           /* packed MX data (fp8 / fp4 x4) */
const char *isa_act_name(int act);
const char *isa_alu_name(int alu);
unsigned    isa_alu_uses(int alu);
bool        isa_alu_needs_integers(int alu);   /* ISA_AU_INT: integer operands only */
int         isa_alu_from_name(const char *s);
const char *isa_space_name(int space);
const char *isa_target_name(int target);
int         isa_target_from_name(const char *s); /* ISA_TARGET_INVALID if unknown */
const isa_target_info *isa_target_get(int target);
/* whether `target`'s core has `feature` (false for either unknown): the
 * one comparison of core versions */
bool        isa_target_has(int target, int feature);
const char *isa_feature_name(int feature);        /* "dma_transpose", ... or NULL */
const char *isa_feature_what(int feature);        /* what it is, for errors */
unsigned    isa_feature_first_core(int feature);  /* 3: NeuronCore-v3 and newer; 0 if unknown */
/* every target's name, `sep` between them ("trn1, trn2, ..."), into buf
 * (truncated to fit); returns the length written */
size_t      isa_target_list(char *buf, size_t size, const char *sep);
const char *isa_cost_class_name(int cost);        /* "matmul", ... or NULL */
const char *isa_cost_class_formula(int cost);     /* the published formula */
const char *isa_status_name(int status);          /* "TRUNCATED", ... */
const char *isa_status_summary(int status);       /* "truncated input", ... */
const char *isa_tensor_kind_name(int kind);       /* "input", ... or NULL */
const char *isa_dma_mode_name(int mode);          /* "direct", ... or NULL */
bool        isa_dma_mode_indexed(int mode);       /* gather/scatter: it takes an index operand */
bool        isa_dma_mode_gathers(int mode);       /* indexed through its source (gather, gather_add) */
bool        isa_dma_mode_rmw(int mode);           /* adds into dst, reading it back (scatter_add, add,
                                                     gather_add) */

/* Table sizes, for callers in other languages that read the tables at run
 * time instead of copying them (the Python bindings). */
typedef enum isa_table {
	ISA_TABLE_OPS = 0,        /* isa_op_name */
	ISA_TABLE_ENGINES,        /* isa_engine_name */
	ISA_TABLE_DTYPES,         /* isa_dtype_name (index 0 is "invalid") */
	ISA_TABLE_ACTS,           /* isa_act_name */
	ISA_TABLE_ALUS,           /* isa_alu_name */
	ISA_TABLE_TARGETS,        /* isa_target_name (index 0 is "invalid") */
	ISA_TABLE_SPACES,         /* isa_space_name */
	ISA_TABLE_COST_CLASSES,   /* isa_cost_class_name */
	ISA_TABLE_STATUS,         /* isa_status_name */
	ISA_TABLE_TENSOR_KINDS,   /* isa_tensor_kind_name */
	ISA_TABLE_DMA_MODES,      /* isa_dma_mode_name */
	ISA_TABLE_FEATURES,       /* isa_feature_name */
	ISA_NUM_TABLES
} isa_table;
unsigned    isa_table_size(int table);            /* 0 for an unknown table */
int         isa_table_from_name(const char *name);   /* "ops", "engines", "dtypes", "acts",
                                                    "alus", "targets", "spaces", "cost_classes",
                                                    "status", "tensor_kinds", "dma_modes",
                                                    "features"; -1 */
const char *isa_table_entry(int table, unsigned i);  /* entry i's name; NULL past the end */

/* ------------------------------------------------------ operand fields */

/* How an instruction reads and writes its access-pattern operands. */
#define ISA_ROLE_READ               0x1u
#define ISA_ROLE_WRITE              0x2u
#define ISA_ROLE_READ_IF_ACCUMULATE 0x4u  /* read too when ISA_FLAG_ACCUMULATE is set */

/* One operand field of an instruction, as isa/isa_formats.def declares it,
 * in the order of the text form. */
typedef struct isa_field_info {
	const char *key;          /* keyword in the text form: "dst" */
	const char *kind;         /* "ap", "ap_optional", "scalar" (immediate or [P,1] AP),
	                             "enum", "imm", "u32", "sem", "desc", "ivec", "flag" */
	int         ap_slot;      /* isa_ap_slot of an AP / scalar operand, else -1 */
	unsigned    role;         /* ISA_ROLE_* bits (operands only) */
	const char *domain;       /* enum: "act", "alu", "perf" or "semop"; else NULL */
	unsigned    slot;         /* e[] / u[] / imm[] index the value is kept in */
	uint32_t    dflt;         /* default: enum code, u32 value, imm integer, flag bit */
	uint32_t    max;          /* u32: largest legal value; alu enum: ISA_AU_* uses */
} isa_field_info;
unsigned isa_op_field_count(int op);              /* 0 for an unknown opcode */
bool     isa_op_field(int op, unsigned i, isa_field_info *out);   /* false past the end */
/* enumeration domains ("act", "alu", "perf", "semop"): size, names, codes */
unsigned    isa_domain_size(const char *domain);  /* 0 if unknown */
const char *isa_domain_name(const char *domain, unsigned index);
unsigned    isa_domain_code(const char *domain, unsigned index);

/* ------------------------------------------------------------- programs */

isa_program *isa_program_new(int target);         /* NULL on no memory */
void         isa_program_free(isa_program *p);
/* host memory the program's tables hold (what isa_program_free releases) */
uint64_t     isa_program_host_bytes(const isa_program *p);
int          isa_program_find_tensor(const isa_program *p, const char *name); /* -1 */
uint64_t     isa_tensor_bytes(const isa_tensor *t); /* 0 if it overflows */
uint64_t     isa_program_instr_count(const isa_program *p);

/* binary form (.nsp): decode checks structure; isa_program_load also runs
 * the validator.  *out is NULL on failure. */
isa_status isa_program_decode(const void *buf, size_t len, isa_program **out,
			      isa_diag *diag);
isa_status isa_program_load(const void *buf, size_t len, isa_program **out,
			    isa_diag *diag);
isa_status isa_program_encode(const isa_program *p, uint8_t **buf, size_t *len,
			      isa_diag *diag);     /* *buf: free() it */

/* text form (.nsasm) */
isa_status isa_asm(const char *text, size_t len, isa_program **out,
		   isa_diag *diag);                /* parses and validates */
/* isa_asm, and *lines: the .nsasm line of every instruction, engine by
 * engine in stream order (sum of n_instr entries; free() it, or
 * nsim_buffer_free from other languages) */
isa_status isa_asm_lines(const char *text, size_t len, isa_program **out, int **lines,
			 isa_diag *diag);
isa_status isa_disasm(const isa_program *p, char **text, size_t *len,
		      isa_diag *diag);             /* *text: free() it */
/* one instruction, for traces and messages; returns bytes written (snprintf) */
int isa_format_instr(const isa_program *p, const isa_instr *in, char *buf,
		     size_t size);
int isa_format_ap(const isa_program *p, const isa_ap *ap, char *buf, size_t size);

/* validator */
isa_status isa_validate(const isa_program *p, isa_diag *diag);

/* access-pattern geometry */
uint64_t isa_ap_free_elems(const isa_ap *ap);     /* product of free sizes */
uint64_t isa_ap_distinct_elems(const isa_ap *ap); /* the same over dims of nonzero stride */
/* byte range [lo, hi) touched inside a partition (SBUF/PSUM) or tensor (HBM);
 * false if it cannot be represented (overflow or negative) */
bool isa_ap_byte_range(const isa_ap *ap, int64_t *lo, int64_t *hi);

/* --------------------------------------------------------------- builder */

/* Access-pattern constructors: a contiguous [nparts, n] tile. */
isa_ap isa_ap_sbuf(int dtype, unsigned start, unsigned nparts, uint64_t offset,
		   uint32_t n);
isa_ap isa_ap_psum(int dtype, unsigned start, unsigned nparts, uint64_t offset,
		   uint32_t n);
/* rows x n elements of tensor `tensor`, rows `row_stride` elements apart */
isa_ap isa_ap_hbm(int dtype, uint32_t tensor, uint64_t offset, uint32_t rows,
		  int64_t row_stride, uint32_t n);
/* replace the free dims: dims[k] = {stride, size}, outermost first */
isa_ap isa_ap_dims(isa_ap ap, unsigned ndims, const int32_t *stride,
		   const uint32_t *size);
isa_imm isa_imm_f32(float v);
isa_imm isa_imm_i32(int32_t v);

/* Adds a tensor; returns its index or -1 (diag says why). */
int isa_builder_tensor(isa_program *p, const char *name, int dtype, int kind,
		       unsigned rank, const uint64_t *shape, isa_diag *diag);
/* Adds a CONST tensor with its data (size must equal the tensor's bytes). */
int isa_builder_const(isa_program *p, const char *name, int dtype, unsigned rank,
		      const uint64_t *shape, const void *data, uint64_t size,
		      isa_diag *diag);
/* Adds a DMA descriptor block; returns its index or -1. `index` may be NULL
 * for ISA_DMA_DIRECT.  An empty name gets "dN". */
int isa_builder_dma(isa_program *p, const char *name, int mode, const isa_ap *dst,
		    const isa_ap *src, const isa_ap *index, isa_diag *diag);
isa_status isa_builder_emit(isa_program *p, int engine, const isa_instr *in,
			    isa_diag *diag);
/* Instruction constructors (fill an isa_instr with defaults set). */
isa_instr isa_instr_init(int op);
isa_status isa_builder_load_stationary(isa_program *p, isa_ap stationary, int perf);
isa_status isa_builder_multiply_moving(isa_program *p, isa_ap dst, isa_ap moving,
				       bool accumulate, int perf);
isa_status isa_builder_activation(isa_program *p, isa_ap dst, isa_ap src, int func,
				  float scale, float bias);
isa_status isa_builder_tensor_tensor(isa_program *p, int engine, isa_ap dst,
				     isa_ap src0, isa_ap src1, int alu);
isa_status isa_builder_tensor_scalar(isa_program *p, int engine, isa_ap dst,
				     isa_ap src, int op0, isa_imm s0, int op1,
				     isa_imm s1);
isa_status isa_builder_tensor_copy(isa_program *p, int engine, isa_ap dst,
				   isa_ap src);
isa_status isa_builder_memset(isa_program *p, int engine, isa_ap dst, isa_imm v);
isa_status isa_builder_dma_copy(isa_program *p, int engine, uint32_t desc,
				unsigned queue, uint32_t sem, uint32_t value);
isa_status isa_builder_sem_wait(isa_program *p, int engine, uint32_t sem,
				int cond, uint32_t value);
isa_status isa_builder_sem_signal(isa_program *p, int engine, uint32_t sem,
				  int op, uint32_t value);
isa_status isa_builder_simple(isa_program *p, int engine, int op); /* barrier, end */
/* Appends `end` to every non-empty stream that lacks it, then validates. */
isa_status isa_builder_finish(isa_program *p, isa_diag *diag);
/* ... and encodes the program it validated, without validating it again
 * (isa_program_encode would): a generated program is validated once here
 * and once more only where its bytes are loaded (isa_program_load, the
 * runtime's trust boundary).  *buf: free() it. */
isa_status isa_builder_finish_encode(isa_program *p, uint8_t **buf, size_t *len, isa_diag *diag);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif /* NEURONSIM_ISA_H */
