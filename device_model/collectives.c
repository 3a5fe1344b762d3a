/*
 * collectives.c -- collective time across NeuronCores (collectives.h).
 *
 * The formulas are the textbook ones for each algorithm over n ranks and a
 * buffer of S bytes (nccom-test's size(B)): every rank sends
 *   all-reduce      2(n-1)/n S   in 2(n-1) ring steps, 2 log2 n RDH steps, 2 mesh steps
 *   all-gather,
 *   reduce-scatter   (n-1)/n S   in n-1 ring steps, log2 n RDH steps, 1 mesh step
 *   broadcast              S     in n-1 steps (a pipelined chain)
 *   all-to-all       (n-1)/n S   in 1 mesh step
 *   send / recv            S     in 1 step
 * and the time is   max(launch, steps x step + wire / rate):
 * the runtime's launch-and-completion handshake (a floor every collective
 * pays) runs beside the data movement, whose steps each cost one handshake
 * with a peer -- a cross-chip one where the ranks span chips -- and whose
 * bytes move at the ring rate times the number of concurrent rings (one
 * per torus dimension the ranks' chips span), capped by the NeuronLink
 * rate of a link where the ring crosses chips.  Rank r is NeuronCore r, on
 * chip r / cores-per-chip; a group given by its global ranks spans the
 * chips those sit on (dm_coll_place_ranks), a group given by its size
 * fills chips in order.  The algorithm by size, as the
 * Neuron collectives library picks it: mesh for small buffers, recursive
 * halving-doubling (power-of-two rank counts) in between, ring above.
 *
 * The fabric figures are each chip row's (chips.c, dm_fabric), where their
 * sources are named.  Sources: HW = ../shared/HARDWARE.md "Interconnect"; CAL = CALIBRATION.md
 * C-12 (2 ranks, all-reduce fp32, 1 KiB - 1 GiB) and C-13 (16 ranks, with
 * the algorithm per size: mesh up to 128 KiB, rdh at 2 MiB, a ring variant
 * from 32 MiB), nccom-test's sample outputs (SDK
 * tools/neuron-sys-tools/nccom-test.rst, "Performance data ... should not
 * be considered up-to-date").  The samples name no instance; a 2-rank
 * run on one instance is two cores of one chip, and the 16-rank one with
 * its two-ring bandwidth spans eight trn1 chips (two cores each), so both
 * rows are read as trn1.
 */
#include "collectives.h"

#include "chip.h"

#include <stdbool.h>
#include <stddef.h>

#define US 1000000ull   /* ps per us */

/* a step between chips: a handshake over NeuronLink.  CAL C-13: 16 ranks
 * at 2 MiB (rdh, 8 steps) take 686 us of which 35 us are bytes; at 32 MiB
 * (ring, 30 steps) 2754 us of which ~550 us are bytes: ~72 us a step */
#define CROSS_CHIP_STEP_PS (72 * US)

static const char *const op_names[DM_COLL_NUM_OPS] = {
	"all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "send_recv", "barrier",
};
static const char *const algo_names[DM_ALGO_NUM] = { "mesh", "rdh", "ring", "p2p" };

const char *dm_coll_op_name(dm_coll_op op) { return (unsigned)op < DM_COLL_NUM_OPS ? op_names[op] : NULL; }
const char *dm_coll_algo_name(dm_coll_algo a) { return (unsigned)a < DM_ALGO_NUM ? algo_names[a] : NULL; }

static uint32_t cores_per_chip(const dm_chip *c)
{
	return c->cores ? c->cores : 1;
}

/* chips the first n ranks fill, and torus dimensions those chips span */
static dm_coll_place in_order(const dm_chip *chip, uint32_t n)
{
	const dm_fabric *f = &chip->fabric;
	uint32_t per = cores_per_chip(chip);
	uint32_t chips = n / per + (n % per != 0);
	return (dm_coll_place){ chips, chips <= 1 ? 0 : chips <= f->torus_x ? 1 : 2 };
}

/* A strided group (an FSDP dimension over a TP one) spans more chips than
 * its size says; the steps of its algorithm cross chips even when a
 * contiguous group of the same size would stay on one. */
int dm_coll_place_ranks(const dm_chip *chip, const uint32_t *ranks, uint32_t n, dm_coll_place *out)
{
	if (!chip || !ranks || !out || n == 0)
		return -1;
	const dm_fabric *f = &chip->fabric;
	uint8_t seen[(DM_COLL_MAX_RANK + 1) / 8] = { 0 };   /* chips seen, at most one per rank */
	uint32_t per = cores_per_chip(chip), per_instance = f->torus_x * f->torus_y;
	uint32_t chips = 0, first = ranks[0] / per;
	bool x_varies = false, y_varies = false, instances = false;
	for (uint32_t i = 0; i < n; i++) {
		if (ranks[i] > DM_COLL_MAX_RANK)
			return -1;
		uint32_t c = ranks[i] / per;
		if (!(seen[c / 8] & (1u << (c % 8)))) {
			seen[c / 8] |= (uint8_t)(1u << (c % 8));
			chips++;
		}
		x_varies |= c % f->torus_x != first % f->torus_x;
		y_varies |= c / f->torus_x % f->torus_y != first / f->torus_x % f->torus_y;
		instances |= c / per_instance != first / per_instance;
	}
	/* the instances' EFA links are not modeled: a group across instances
	 * is charged as one spanning both torus dimensions */
	*out = (dm_coll_place){ chips, instances ? 2 : (uint32_t)x_varies + (uint32_t)y_varies };
	return 0;
}

int dm_coll_estimate(const dm_chip *chip, dm_coll_op op, uint32_t n, uint64_t bytes, dm_coll_cost *out)
{
	return dm_coll_estimate_placed(chip, op, n, NULL, bytes, out);
}

int dm_coll_estimate_placed(const dm_chip *chip, dm_coll_op op, uint32_t n, const dm_coll_place *place,
			    uint64_t bytes, dm_coll_cost *out)
{
	if (!chip || !out || (unsigned)op >= DM_COLL_NUM_OPS || n == 0 || bytes > (1ull << 50))
		return -1;
	*out = (dm_coll_cost){ .algo = DM_ALGO_P2P, .rings = 1 };
	if (n == 1 && op != DM_COLL_SEND_RECV)
		return 0;   /* one rank: nothing moves */
	if (op == DM_COLL_BARRIER) {
		op = DM_COLL_ALL_REDUCE;
		bytes = 4;
	}
	/* send / recv: between two ranks; placed, the group's placement */
	const dm_fabric *f = &chip->fabric;
	dm_coll_place p = place ? *place : in_order(chip, op == DM_COLL_SEND_RECV ? 2 : n);
	uint32_t dims = p.dims;
	/* the algorithm */
	dm_coll_algo a = DM_ALGO_RING;
	bool pow2 = (n & (n - 1)) == 0;
	switch (op) {
	case DM_COLL_ALL_REDUCE:
	case DM_COLL_ALL_GATHER:
	case DM_COLL_REDUCE_SCATTER:
		a = bytes <= f->mesh_max ? DM_ALGO_MESH : bytes <= f->rdh_max && pow2 ? DM_ALGO_RDH : DM_ALGO_RING;
		break;
	case DM_COLL_ALL_TO_ALL:
		a = DM_ALGO_MESH;
		break;
	case DM_COLL_SEND_RECV:
		a = DM_ALGO_P2P;
		break;
	default:
		break;
	}
	/* steps and bytes each rank sends */
	bool full = op == DM_COLL_ALL_REDUCE;
	uint64_t share = bytes / n * (n - 1);   /* (n-1)/n S */
	uint32_t steps = 1;
	uint64_t wire = share;
	switch (op) {
	case DM_COLL_ALL_REDUCE:
	case DM_COLL_ALL_GATHER:
	case DM_COLL_REDUCE_SCATTER:
		steps = a == DM_ALGO_MESH ? 1 : a == DM_ALGO_RDH ? (uint32_t)dm_log2_ceil(n) : n - 1;
		if (full) {
			steps *= 2;
			wire = 2 * share;
		}
		break;
	case DM_COLL_BROADCAST:
		steps = n - 1;
		wire = bytes;
		break;
	case DM_COLL_SEND_RECV:
		wire = bytes;
		break;
	default:
		break;
	}
	/* the rate: rings over the torus dimensions spanned (mesh: a rank's
	 * peers in parallel, over the same DMA rings), capped by a link's rate
	 * where they cross chips */
	uint32_t rings = dims == 2 ? 2 : 1;
	uint64_t rate = f->ring_rate;
	if (dims && f->link_rate < rate)
		rate = f->link_rate;
	rate *= rings;
	uint64_t step = dims ? CROSS_CHIP_STEP_PS : f->step_ps;
	/* wire / rate in ps without overflowing: whole microseconds, then the rest */
	uint64_t move = (uint64_t)steps * step + wire / rate * US + ((wire % rate) * US + rate - 1) / rate;
	out->ps = move > f->launch_ps ? move : f->launch_ps;
	out->algo = a;
	out->steps = steps;
	out->rings = rings;
	out->wire_bytes = wire;
	return 0;
}
