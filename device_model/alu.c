/*
 * alu.c -- the scalar meaning of every ALU operator and activation function.
 * Floating point in fp32 (engines compute in FP32, HARDWARE.md); integer
 * operands of integer-only instructions exactly in 64 bits.
 */
#include "ops.h"

#include "numerics.h"

#include <math.h>

float dm_alu_f32(int op, float a, float b)
{
	switch (op) {
	case ISA_ALU_bypass:      return a;
	case ISA_ALU_add:         return a + b;
	case ISA_ALU_subtract:    return a - b;
	case ISA_ALU_multiply:    return a * b;
	case ISA_ALU_divide:      return a / b;
	case ISA_ALU_max:         return (a > b || isnan(a)) ? a : b;
	case ISA_ALU_min:         return (a < b || isnan(a)) ? a : b;
	case ISA_ALU_absmax:      return fmaxf(fabsf(a), fabsf(b));
	case ISA_ALU_pow:         return powf(a, b);
	case ISA_ALU_mod:         { float r = fmodf(a, b); return (r != 0.0f && ((r < 0) != (b < 0))) ? r + b : r; }
	case ISA_ALU_fmod:        return fmodf(a, b);
	case ISA_ALU_is_equal:    return a == b;
	case ISA_ALU_not_equal:   return a != b;
	case ISA_ALU_is_lt:       return a < b;
	case ISA_ALU_is_le:       return a <= b;
	case ISA_ALU_is_gt:       return a > b;
	case ISA_ALU_is_ge:       return a >= b;
	case ISA_ALU_logical_and: return (a != 0.0f) && (b != 0.0f);
	case ISA_ALU_logical_or:  return (a != 0.0f) || (b != 0.0f);
	case ISA_ALU_logical_xor: return (a != 0.0f) != (b != 0.0f);
	case ISA_ALU_abs:         return fabsf(a);
	case ISA_ALU_square:      return a * a;
	case ISA_ALU_relu:        return (a > 0.0f || isnan(a)) ? a : 0.0f;
	case ISA_ALU_rsqrt:       return 1.0f / sqrtf(a);
	case ISA_ALU_reciprocal:  return 1.0f / a;
	default:                  /* integer-only operators on float data */
		return (float)dm_alu_i64(op, (int64_t)a, (int64_t)b);
	}
}

/*
 * Row forms: the operator switch hoisted out of the element loop (the hot
 * path of full-mode simulation).  Operators without a fast loop fall back
 * to dm_alu_f32 per element, with the same result.
 */
#define ROW_LOOP(expr)                                \
	for (uint64_t i = 0; i < n; i++) {           \
		float a = x[i], b = B;                \
		x[i] = (expr);                        \
	}

static DM_HOT void dm_alu_row_f32_clones(int op, float *x, const float *y, float scalar, bool reverse, uint64_t n)
{
#define B (y ? y[i] : scalar)
	if (reverse) {
		for (uint64_t i = 0; i < n; i++)
			x[i] = dm_alu_f32(op, B, x[i]);
		return;
	}
	switch (op) {
	case ISA_ALU_add:      ROW_LOOP(a + b) break;
	case ISA_ALU_subtract: ROW_LOOP(a - b) break;
	case ISA_ALU_multiply: ROW_LOOP(a * b) break;
	case ISA_ALU_divide:   ROW_LOOP(a / b) break;
	case ISA_ALU_max:      ROW_LOOP((a > b || isnan(a)) ? a : b) break;
	case ISA_ALU_min:      ROW_LOOP((a < b || isnan(a)) ? a : b) break;
	default:
		for (uint64_t i = 0; i < n; i++)
			x[i] = dm_alu_f32(op, x[i], B);
		break;
	}
#undef B
}

void dm_alu_row_f32(int op, float *x, const float *y, float scalar, bool reverse, uint64_t n)
{
	dm_alu_row_f32_clones(op, x, y, scalar, reverse, n);
}
#undef ROW_LOOP

static int64_t floordiv(int64_t a, int64_t b)
{
	int64_t q = a / b;
	return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

int64_t dm_alu_i64(int op, int64_t a, int64_t b)
{
	switch (op) {
	case ISA_ALU_bypass:      return a;
	case ISA_ALU_add:         return (int64_t)((uint64_t)a + (uint64_t)b);
	case ISA_ALU_subtract:    return (int64_t)((uint64_t)a - (uint64_t)b);
	case ISA_ALU_multiply:    return (int64_t)((uint64_t)a * (uint64_t)b);
	/* integer divide floors (as torch's floor_divide); x/0 gives 0 here,
	 * never a host trap */
	case ISA_ALU_divide:      return b == 0 || (a == INT64_MIN && b == -1) ? 0 : floordiv(a, b);
	case ISA_ALU_max:         return a > b ? a : b;
	case ISA_ALU_min:         return a < b ? a : b;
	case ISA_ALU_absmax:      { int64_t x = a < 0 ? -a : a, y = b < 0 ? -b : b; return x > y ? x : y; }
	case ISA_ALU_pow:         return (int64_t)pow((double)a, (double)b);
	case ISA_ALU_mod:         return b == 0 || (a == INT64_MIN && b == -1) ? 0 : a - floordiv(a, b) * b;
	case ISA_ALU_fmod:        return b == 0 || (a == INT64_MIN && b == -1) ? 0 : a % b;
	case ISA_ALU_is_equal:    return a == b;
	case ISA_ALU_not_equal:   return a != b;
	case ISA_ALU_is_lt:       return a < b;
	case ISA_ALU_is_le:       return a <= b;
	case ISA_ALU_is_gt:       return a > b;
	case ISA_ALU_is_ge:       return a >= b;
	case ISA_ALU_logical_and: return a && b;
	case ISA_ALU_logical_or:  return a || b;
	case ISA_ALU_logical_xor: return !a != !b;
	/* unary; wrapping like the integer multiply, 1/x and 1/sqrt(x) truncated
	 * (0 for 0, as integer division by zero is here) */
	case ISA_ALU_abs:         return a < 0 ? (int64_t)(0 - (uint64_t)a) : a;
	case ISA_ALU_square:      return (int64_t)((uint64_t)a * (uint64_t)a);
	case ISA_ALU_relu:        return a > 0 ? a : 0;
	case ISA_ALU_rsqrt:       return a <= 0 ? 0 : (int64_t)(1.0 / sqrt((double)a));
	case ISA_ALU_reciprocal:  return a == 0 ? 0 : (a == 1 || a == -1 ? a : 0);
	case ISA_ALU_bitwise_and: return a & b;
	case ISA_ALU_bitwise_or:  return a | b;
	case ISA_ALU_bitwise_xor: return a ^ b;
	/* shifts by 0..63; larger or negative counts give 0 (or -1 for >> of negatives) */
	case ISA_ALU_shift_left:  return b < 0 || b > 63 ? 0 : (int64_t)((uint64_t)a << b);
	case ISA_ALU_shift_right: return b < 0 || b > 63 ? (a < 0 ? -1 : 0) : a >> b;
	default:                  return 0;
	}
}

/* one step of a fold: a <op>= v (max / min keep the first NaN) */
#define STEP_ADD(a, v) ((a) += (v))
#define STEP_MAX(a, v) ((a) = ((a) > (v) || isnan(a)) ? (a) : (v))
#define STEP_MIN(a, v) ((a) = ((a) < (v) || isnan(a)) ? (a) : (v))

/* x[0] <op> x[1] <op> ... left to right (the order an engine's accumulator
 * takes the elements in), the operator switch out of the loop; n >= 1 */
float dm_fold_row_f32(int op, const float *x, uint64_t n)
{
	float a = x[0];
	switch (op) {
	case ISA_ALU_add:
		for (uint64_t i = 1; i < n; i++)
			STEP_ADD(a, x[i]);
		break;
	case ISA_ALU_max:
		for (uint64_t i = 1; i < n; i++)
			STEP_MAX(a, x[i]);
		break;
	case ISA_ALU_min:
		for (uint64_t i = 1; i < n; i++)
			STEP_MIN(a, x[i]);
		break;
	default:
		for (uint64_t i = 1; i < n; i++)
			a = dm_alu_f32(op, a, x[i]);
		break;
	}
	return a;
}

/* One row's fold is a chain of dependent adds (or compares): a core runs
 * it at one element per add latency.  Eight rows' chains side by side keep
 * the same order within each row, so the same bits, at eight times the
 * rate. */
#define FOLD8(step)                                                                  \
	do {                                                                         \
		const float *x0 = x + r * stride;                                    \
		float a0 = x0[0], a1 = x0[stride], a2 = x0[2 * stride],              \
		      a3 = x0[3 * stride], a4 = x0[4 * stride], a5 = x0[5 * stride], \
		      a6 = x0[6 * stride], a7 = x0[7 * stride];                      \
		for (uint64_t i = 1; i < n; i++) {                                   \
			step(a0, x0[i]); step(a1, x0[stride + i]);                   \
			step(a2, x0[2 * stride + i]); step(a3, x0[3 * stride + i]);  \
			step(a4, x0[4 * stride + i]); step(a5, x0[5 * stride + i]);  \
			step(a6, x0[6 * stride + i]); step(a7, x0[7 * stride + i]);  \
		}                                                                    \
		out[r] = a0; out[r + 1] = a1; out[r + 2] = a2; out[r + 3] = a3;      \
		out[r + 4] = a4; out[r + 5] = a5; out[r + 6] = a6; out[r + 7] = a7;  \
	} while (0)

void dm_fold_rows_f32(int op, const float *x, uint64_t stride, uint64_t n, uint64_t nrows,
		      float *out)
{
	uint64_t r = 0;
	if (op == ISA_ALU_add || op == ISA_ALU_max || op == ISA_ALU_min) {
		for (; r + 8 <= nrows; r += 8) {
			if (op == ISA_ALU_add)
				FOLD8(STEP_ADD);
			else if (op == ISA_ALU_max)
				FOLD8(STEP_MAX);
			else
				FOLD8(STEP_MIN);
		}
	}
	for (; r < nrows; r++)
		out[r] = dm_fold_row_f32(op, x + r * stride, n);
}
#undef FOLD8
#undef STEP_ADD
#undef STEP_MAX
#undef STEP_MIN

#define ACT_LOOP(expr)                                   \
	for (uint64_t i = 0; i < n; i++) {               \
		float v = x[i] * scale + bias;           \
		x[i] = (expr);                           \
	}

/* the row form of dm_act_f32 (same results): the switch out of the loop.
 * A zero bias is added as -0, the identity of addition: x * scale keeps its
 * sign when it is a zero (neg(0) is -0, atan(-0) is -0, as on the CPU),
 * where + 0 would turn -0 into +0. */
static DM_HOT void dm_act_row_f32_clones(int func, float *x, float scale, float bias, uint64_t n)
{
	if (bias == 0.0f)
		bias = -0.0f;
	switch (func) {
	case ISA_ACT_identity:   ACT_LOOP(v) break;
	case ISA_ACT_relu:       ACT_LOOP(v < 0.0f ? 0.0f : v) break;
	case ISA_ACT_exp:        ACT_LOOP(dm_expf(v)) break;
	case ISA_ACT_silu:       ACT_LOOP(v / (1.0f + dm_expf(-v))) break;
	case ISA_ACT_sigmoid:    ACT_LOOP(1.0f / (1.0f + dm_expf(-v))) break;
	case ISA_ACT_sqrt:       ACT_LOOP(sqrtf(v)) break;
	case ISA_ACT_rsqrt:      ACT_LOOP(1.0f / sqrtf(v)) break;
	case ISA_ACT_reciprocal: ACT_LOOP(1.0f / v) break;
	case ISA_ACT_square:     ACT_LOOP(v * v) break;
	default:                 ACT_LOOP(dm_act_f32(func, v)) break;
	}
}

void dm_act_row_f32(int func, float *x, float scale, float bias, uint64_t n)
{
	dm_act_row_f32_clones(func, x, scale, bias, n);
}
#undef ACT_LOOP

float dm_act_f32(int func, float x)
{
	switch (func) {
	case ISA_ACT_identity:      return x;
	/* NaN passes through relu as through CPU PyTorch's clamp_min */
	case ISA_ACT_relu:          return x < 0.0f ? 0.0f : x;
	/* CPU PyTorch's vectorized GELU gives NaN at both infinities (its erf
	 * polynomial overflows at +inf; -inf * 0 at -inf); we match it */
	case ISA_ACT_gelu:          return isinf(x) ? NAN : 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
	case ISA_ACT_gelu_tanh: {
		float u = 0.79788456080286536f * (x + 0.044715f * x * x * x);
		return 0.5f * x * (1.0f + tanhf(u));
	}
	case ISA_ACT_gelu_backward: {
		float cdf = 0.5f * (1.0f + erff(x * 0.70710678118654752f));
		float pdf = 0.39894228040143268f * dm_expf(-0.5f * x * x);
		return cdf + x * pdf;
	}
	case ISA_ACT_silu:          return x / (1.0f + dm_expf(-x));
	case ISA_ACT_sigmoid:       return 1.0f / (1.0f + dm_expf(-x));
	case ISA_ACT_tanh:          return tanhf(x);
	case ISA_ACT_exp:           return dm_expf(x);
	case ISA_ACT_log:           return logf(x);
	case ISA_ACT_sqrt:          return sqrtf(x);
	case ISA_ACT_rsqrt:         return 1.0f / sqrtf(x);
	case ISA_ACT_reciprocal:    return 1.0f / x;
	case ISA_ACT_square:        return x * x;
	case ISA_ACT_abs:           return fabsf(x);
	case ISA_ACT_sign:          return x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : x;
	case ISA_ACT_softplus:      return x > 20.0f ? x : log1pf(dm_expf(x));
	case ISA_ACT_sin:           return sinf(x);
	case ISA_ACT_cos:           return cosf(x);
	case ISA_ACT_erf:           return erff(x);
	case ISA_ACT_arctan:        return atanf(x);
	case ISA_ACT_tan:           return tanf(x);
	case ISA_ACT_gelu_apprx_sigmoid:
		return x / (1.0f + dm_expf(-1.702f * x));
	case ISA_ACT_gelu_apprx_sigmoid_backward: {
		float s = 1.0f / (1.0f + dm_expf(-1.702f * x));
		return s + 1.702f * x * s * (1.0f - s);
	}
	case ISA_ACT_silu_backward: {
		float s = 1.0f / (1.0f + dm_expf(-x));
		return s * (1.0f + x * (1.0f - s));
	}
	case ISA_ACT_mish:          return x * tanhf(x > 20.0f ? x : log1pf(dm_expf(x)));
	case ISA_ACT_erf_backward:  return 1.12837916709551257f * dm_expf(-x * x);
	default:                    return x;
	}
}
