/*
 * collectives.h -- the time of a collective across NeuronCores: algorithm
 * formulas (ring, recursive halving-doubling, mesh, point to point) over
 * the fabric data of a generation's chip row (chips.c).  A pure function of its
 * arguments: the runtime API (nsim_collective_estimate) and the torch
 * plugin's c10d backend charge what it returns to each rank's clock.
 */
#ifndef NSIM_DM_COLLECTIVES_H
#define NSIM_DM_COLLECTIVES_H

#include <stdint.h>

#include "chip.h"

typedef enum dm_coll_op {
	DM_COLL_ALL_REDUCE,
	DM_COLL_ALL_GATHER,       /* bytes: the gathered output */
	DM_COLL_REDUCE_SCATTER,   /* bytes: the whole input */
	DM_COLL_BROADCAST,
	DM_COLL_ALL_TO_ALL,       /* bytes: one rank's buffer */
	DM_COLL_SEND_RECV,
	DM_COLL_BARRIER,
	DM_COLL_NUM_OPS
} dm_coll_op;

typedef enum dm_coll_algo { DM_ALGO_MESH, DM_ALGO_RDH, DM_ALGO_RING, DM_ALGO_P2P, DM_ALGO_NUM } dm_coll_algo;

typedef struct dm_coll_cost {
	uint64_t ps;                /* simulated time */
	dm_coll_algo algo;
	uint32_t steps;             /* sequential exchanges */
	uint32_t rings;             /* concurrent rings (torus dimensions the ranks span) */
	uint64_t wire_bytes;        /* bytes each rank sends */
} dm_coll_cost;

const char *dm_coll_op_name(dm_coll_op op);   /* "all_reduce" */
const char *dm_coll_algo_name(dm_coll_algo a);/* "ring" */

/* Where a group's ranks sit: the chips they occupy and the torus
 * dimensions those chips span (0: one chip, 1: a row, 2: rows and
 * columns, or more than one instance). */
typedef struct dm_coll_place {
	uint32_t chips;
	uint32_t dims;
} dm_coll_place;

#define DM_COLL_MAX_RANK 4095u   /* the highest global rank a placement takes */

/* the placement of global ranks ranks[0..n): rank r is NeuronCore r, on
 * chip r / cores-per-chip, chip c at torus (c % x, c / x % y) of instance
 * c / (x y).  0, or -1 for n == 0 or a rank above DM_COLL_MAX_RANK. */
int dm_coll_place_ranks(const dm_chip *chip, const uint32_t *ranks, uint32_t n, dm_coll_place *out);

/* cost of `op` over `ranks` ranks moving `bytes` (see dm_coll_op), the
 * ranks filling chips in order (global ranks 0..ranks-1); 0 on success, -1
 * for a bad op, ranks == 0 or a size whose time overflows */
int dm_coll_estimate(const dm_chip *chip, dm_coll_op op, uint32_t ranks, uint64_t bytes, dm_coll_cost *out);
/* ... over ranks placed as `place` says (NULL: in order) */
int dm_coll_estimate_placed(const dm_chip *chip, dm_coll_op op, uint32_t ranks, const dm_coll_place *place,
			    uint64_t bytes, dm_coll_cost *out);

#endif
