/*
 * hbm_presets.c -- HBM standards as data: named presets (organization and
 * timing in tCK cycles) and the constraint table every controller obeys.
 * Sources: ../shared/HARDWARE.md "HBM timing presets" (Ramulator2's HBM2 and
 * HBM3 configurations) and the derivations there for the Trainium parts: a
 * chip's preset is derived from its chip row (standard, per-pin data rate,
 * stacks, capacity), never listed here.
 */
#include "hbm.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "chip.h"
#include "neuronsim/isa.h"

#define T(n) [HBM_##n]

/* Ramulator2 hbm2.py "HBM2_2Gbps": tCK 1 ns; 8 channels x 2 pseudo-channels
 * of 64 bits; BL4 = 2 CK = 32 bytes; 4 bank groups x 4 banks; 1 KiB pages.
 * tRFC 260 ns (8 Gb die, the low end of HARDWARE.md's 260-350 ns), tREFI 3.9 us.
 * Per-bank refresh figures are not in HARDWARE.md: tRFCpb = tRFC / 2 and
 * tRREFD = tRRD_L are assumptions, used only when per-bank refresh is chosen. */
static const dm_hbm_preset hbm2_2g = {
	.name = "HBM2-2.0", .source = "Ramulator2 hbm2.py (HBM2_2Gbps), HARDWARE.md",
	.tck_ps = 1000, .stacks = 1, .pcs_per_stack = 16, .bankgroups = 4, .banks_per_group = 4,
	.rows = 16384, .columns = 32, .burst_bytes = 32,
	.t = { T(nBL) = 2, T(CL) = 14, T(CWL) = 5, T(tRCDRD) = 14, T(tRCDWR) = 12, T(tRP) = 14,
	       T(tRAS) = 34, T(tRC) = 48, T(tRRDS) = 4, T(tRRDL) = 4, T(tFAW) = 15, T(tCCDS) = 2,
	       T(tCCDL) = 4, T(tWR) = 16, T(tRTP) = 5, T(tWTRS) = 6, T(tWTRL) = 8, T(tRFC) = 260,
	       T(tRFCpb) = 130, T(tRREFD) = 4, T(tREFI) = 3900 },
};

/* Ramulator2 hbm3.py (HBM3 6.4 Gb/s): tCK 0.625 ns; 32-bit pseudo-channels, 2
 * per channel, 16 channels per stack; BL8 = 2 CK = 32 bytes; tRFC 260 ns. */
static const dm_hbm_preset hbm3_6g4 = {
	.name = "HBM3-6.4", .source = "Ramulator2 hbm3.py (HBM3 6.4 Gb/s), HARDWARE.md",
	.tck_ps = 625, .stacks = 1, .pcs_per_stack = 32, .bankgroups = 4, .banks_per_group = 4,
	.rows = 32768, .columns = 32, .burst_bytes = 32,
	.t = { T(nBL) = 2, T(CL) = 20, T(CWL) = 10, T(tRCDRD) = 31, T(tRCDWR) = 15, T(tRP) = 26,
	       T(tRAS) = 45, T(tRC) = 72, T(tRRDS) = 4, T(tRRDL) = 5, T(tFAW) = 24, T(tCCDS) = 2,
	       T(tCCDL) = 4, T(tWR) = 33, T(tRTP) = 9, T(tWTRS) = 7, T(tWTRL) = 10, T(tRFC) = 416,
	       T(tRFCpb) = 208, T(tRREFD) = 5, T(tREFI) = 6240 },
};

/* the published presets, by index (dm_hbm_preset_base_name) */
static const dm_hbm_preset *const base_presets[] = { &hbm2_2g, &hbm3_6g4 };

/* The standards a chip row may name: the published preset whose analog
 * timings a part of that standard keeps, and the data transfers per pin in
 * one tCK (HBM2: DDR on CK, 2; HBM3: 4, as Ramulator2's hbm3.py counts its
 * 0.625 ns tCK at 6.4 Gb/s). */
static const struct {
	const char          *standard;
	const dm_hbm_preset *base;
	uint32_t             transfers_per_ck;
} standards[] = {
	{ "HBM2", &hbm2_2g, 2 }, { "HBM2E", &hbm2_2g, 2 },
	{ "HBM3", &hbm3_6g4, 4 }, { "HBM3E", &hbm3_6g4, 4 },
};

/*
 * A chip's part, derived as HARDWARE.md does (nobody ships a configuration
 * for these): keep the base standard's core timings constant in nanoseconds,
 * set the clock from the chip row's per-pin data rate, round each timing up
 * to whole cycles; the burst (2 CK) and tCCD_S/tCCD_L stay in clocks.  The
 * stack count and capacity are the chip row's; rows per bank follow.
 */
static bool derive(const dm_chip *c, dm_hbm_preset *p, char *name, size_t name_size,
		   char *source, size_t source_size)
{
	size_t i = 0;
	while (i < sizeof(standards) / sizeof(standards[0]) && strcmp(standards[i].standard, c->hbm_standard))
		i++;
	if (i == sizeof(standards) / sizeof(standards[0]) || !c->hbm_mbps || !c->hbm_stacks)
		return false;
	const dm_hbm_preset *base = standards[i].base;
	uint32_t tck_ps = (uint32_t)((standards[i].transfers_per_ck * 1000000ull + c->hbm_mbps / 2) / c->hbm_mbps);
	unsigned gbps10 = (c->hbm_mbps + 50) / 100;            /* Gb/s, one decimal */
	snprintf(name, name_size, "%s-%u.%u", c->hbm_standard, gbps10 / 10, gbps10 % 10);
	snprintf(source, source_size, "%s timings in ns at %u.%u Gb/s (HARDWARE.md, derived)", base->name,
		 gbps10 / 10, gbps10 % 10);
	*p = *base;
	p->name = name;
	p->source = source;
	p->tck_ps = tck_ps;
	p->stacks = c->hbm_stacks;
	/* the burst and column-to-column spacing are counted in clocks (they
	 * are what the data rate is made of); everything else is analog time */
	for (int k = 0; k < HBM_NUM_PARAMS; k++)
		if (k != HBM_nBL && k != HBM_tCCDS && k != HBM_tCCDL)
			p->t[k] = (uint32_t)ceil((double)base->t[k] * base->tck_ps / tck_ps - 1e-9);
	uint64_t row_bytes = (uint64_t)p->columns * p->burst_bytes;
	p->rows = (uint32_t)(c->hbm_bytes / ((uint64_t)p->stacks * p->pcs_per_stack * p->bankgroups *
					    p->banks_per_group * row_bytes));
	return true;
}

static struct {
	dm_hbm_preset preset;
	bool          valid;
	char          name[32], source[96];
} parts[ISA_NUM_TARGETS];
static pthread_once_t parts_once = PTHREAD_ONCE_INIT;

static void derive_parts(void)
{
	for (int t = 0; t < ISA_NUM_TARGETS; t++) {
		const dm_chip *c = dm_chip_get(t);
		parts[t].valid = c && derive(c, &parts[t].preset, parts[t].name, sizeof(parts[t].name),
					     parts[t].source, sizeof(parts[t].source));
	}
}

const dm_hbm_preset *dm_hbm_preset_get(const char *name)
{
	if (!name)
		return NULL;
	for (unsigned i = 0; dm_hbm_preset_base_name(i); i++)
		if (!strcmp(base_presets[i]->name, name))
			return base_presets[i];
	pthread_once(&parts_once, derive_parts);
	for (int t = 0; t < ISA_NUM_TARGETS; t++)
		if (parts[t].valid && !strcmp(parts[t].preset.name, name))
			return &parts[t].preset;
	return NULL;
}

const char *dm_hbm_preset_base_name(unsigned i)
{
	return i < sizeof(base_presets) / sizeof(base_presets[0]) ? base_presets[i]->name : NULL;
}

const dm_hbm_preset *dm_hbm_preset_for_target(int target)
{
	if (target < 0 || target >= ISA_NUM_TARGETS)
		return NULL;
	pthread_once(&parts_once, derive_parts);
	return parts[target].valid ? &parts[target].preset : NULL;
}

double dm_hbm_peak_bytes_per_ps(const dm_hbm_preset *p)
{
	double per_pc = (double)p->burst_bytes / ((double)p->t[HBM_nBL] * p->tck_ps);
	return per_pc * p->stacks * p->pcs_per_stack;
}

/*
 * The constraint table (Ramulator2's HBM structure).  Column-to-column,
 * activate spacing (with the four-activate window), activate-to-column,
 * read/write turnarounds, precharge and refresh rules.
 */
uint32_t dm_hbm_constraints(const dm_hbm_preset *p, dm_hbm_constraint *out, uint32_t cap)
{
	const uint32_t *t = p->t;
	const dm_hbm_constraint rows[] = {
		{ HBM_RD, HBM_RD, HBM_SCOPE_BG, 1, t[HBM_tCCDL], "tCCD_L" },
		{ HBM_RD, HBM_RD, HBM_SCOPE_PC, 1, t[HBM_tCCDS], "tCCD_S" },
		{ HBM_WR, HBM_WR, HBM_SCOPE_BG, 1, t[HBM_tCCDL], "tCCD_L" },
		{ HBM_WR, HBM_WR, HBM_SCOPE_PC, 1, t[HBM_tCCDS], "tCCD_S" },
		/* read to write: the read's data must clear the bus (tRTW) */
		{ HBM_RD, HBM_WR, HBM_SCOPE_PC, 1, t[HBM_CL] + t[HBM_nBL] + 2 - t[HBM_CWL], "tRTW" },
		{ HBM_WR, HBM_RD, HBM_SCOPE_BG, 1, t[HBM_CWL] + t[HBM_nBL] + t[HBM_tWTRL], "tWTR_L" },
		{ HBM_WR, HBM_RD, HBM_SCOPE_PC, 1, t[HBM_CWL] + t[HBM_nBL] + t[HBM_tWTRS], "tWTR_S" },
		{ HBM_ACT, HBM_ACT, HBM_SCOPE_BANK, 1, t[HBM_tRC], "tRC" },
		{ HBM_ACT, HBM_ACT, HBM_SCOPE_BG, 1, t[HBM_tRRDL], "tRRD_L" },
		{ HBM_ACT, HBM_ACT, HBM_SCOPE_PC, 1, t[HBM_tRRDS], "tRRD_S" },
		{ HBM_ACT, HBM_ACT, HBM_SCOPE_PC, 4, t[HBM_tFAW], "tFAW" },
		{ HBM_ACT, HBM_RD, HBM_SCOPE_BANK, 1, t[HBM_tRCDRD], "tRCDRD" },
		{ HBM_ACT, HBM_WR, HBM_SCOPE_BANK, 1, t[HBM_tRCDWR], "tRCDWR" },
		{ HBM_ACT, HBM_PRE, HBM_SCOPE_BANK, 1, t[HBM_tRAS], "tRAS" },
		{ HBM_RD, HBM_PRE, HBM_SCOPE_BANK, 1, t[HBM_tRTP], "tRTP" },
		{ HBM_WR, HBM_PRE, HBM_SCOPE_BANK, 1, t[HBM_CWL] + t[HBM_nBL] + t[HBM_tWR], "tWR" },
		{ HBM_PRE, HBM_ACT, HBM_SCOPE_BANK, 1, t[HBM_tRP], "tRP" },
		{ HBM_PRE, HBM_REFPB, HBM_SCOPE_BANK, 1, t[HBM_tRP], "tRP" },
		{ HBM_PREA, HBM_ACT, HBM_SCOPE_PC, 1, t[HBM_tRP], "tRP" },
		{ HBM_PREA, HBM_REFAB, HBM_SCOPE_PC, 1, t[HBM_tRP], "tRP" },
		{ HBM_PRE, HBM_REFAB, HBM_SCOPE_PC, 1, t[HBM_tRP], "tRP" },
		{ HBM_REFAB, HBM_ACT, HBM_SCOPE_PC, 1, t[HBM_tRFC], "tRFC" },
		{ HBM_REFAB, HBM_REFAB, HBM_SCOPE_PC, 1, t[HBM_tRFC], "tRFC" },
		{ HBM_REFPB, HBM_ACT, HBM_SCOPE_BANK, 1, t[HBM_tRFCpb], "tRFCpb" },
		{ HBM_REFPB, HBM_REFPB, HBM_SCOPE_PC, 1, t[HBM_tRREFD], "tRREFD" },
	};
	uint32_t n = sizeof(rows) / sizeof(rows[0]);
	for (uint32_t i = 0; i < n && i < cap; i++)
		out[i] = rows[i];
	return n;
}

/*
 * Default interleave, low to high: burst offset, pseudo-channel (so
 * consecutive bursts spread over every PC of the chip), bank group (so each
 * PC's consecutive bursts alternate groups and stream at tCCD_S), column,
 * bank, row.
 */
dm_hbm_loc dm_hbm_map(const dm_hbm_preset *p, uint64_t addr)
{
	dm_hbm_loc l;
	uint64_t b = addr / p->burst_bytes;
	uint32_t pcs = p->stacks * p->pcs_per_stack;
	l.pc = (uint32_t)(b % pcs);
	b /= pcs;
	l.bg = (uint32_t)(b % p->bankgroups);
	b /= p->bankgroups;
	l.col = (uint32_t)(b % p->columns);
	b /= p->columns;
	l.bank = (uint32_t)(b % p->banks_per_group);
	b /= p->banks_per_group;
	l.row = (uint32_t)(b % p->rows);
	return l;
}
