/*
 * hbm_presets.c -- HBM standards as data: named presets (organization and
 * timing in tCK cycles) and the constraint table every controller obeys.
 * Sources: ../shared/HARDWARE.md "HBM timing presets" (Ramulator2's HBM2 and
 * HBM3 configurations) and the derivations there for the Trainium parts.
 */
#include "hbm.h"

#include <math.h>
#include <string.h>

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

/*
 * Parts nobody ships a configuration for, derived as HARDWARE.md does: keep
 * the base standard's core timings constant in nanoseconds, change the clock
 * to the data rate that gives the chip's published bandwidth, and round each
 * timing up to whole cycles.  The burst (2 CK) and tCCD_S/tCCD_L stay in
 * clocks.
 */
static dm_hbm_preset derive(const dm_hbm_preset *base, const char *name, const char *source,
			    uint32_t tck_ps, uint32_t stacks, uint64_t chip_bytes)
{
	dm_hbm_preset p = *base;
	p.name = name;
	p.source = source;
	p.tck_ps = tck_ps;
	p.stacks = stacks;
	/* the burst and column-to-column spacing are counted in clocks (they
	 * are what the data rate is made of); everything else is analog time */
	for (int i = 0; i < HBM_NUM_PARAMS; i++)
		if (i != HBM_nBL && i != HBM_tCCDS && i != HBM_tCCDL)
			p.t[i] = (uint32_t)ceil((double)base->t[i] * base->tck_ps / tck_ps - 1e-9);
	uint64_t row_bytes = (uint64_t)p.columns * p.burst_bytes;
	p.rows = (uint32_t)(chip_bytes / ((uint64_t)stacks * p.pcs_per_stack * p.bankgroups *
					 p.banks_per_group * row_bytes));
	return p;
}

static dm_hbm_preset trn1_hbm, trn2_hbm, trn3_hbm;
static bool derived;

static void derive_all(void)
{
	if (derived)
		return;
	/* trn1: HBM2E 3.2 Gb/s -> tCK 625 ps; 2 stacks x 16 PCs x 25.6 GB/s = 819 GB/s
	 * (published 820 GB/s), 32 GiB */
	trn1_hbm = derive(&hbm2_2g, "HBM2E-3.2", "HBM2 timings in ns at 3.2 Gb/s (HARDWARE.md, derived)",
			  625, 2, 32ull << 30);
	/* trn2: 2.9 TB/s over 4 stacks x 32 PCs: 22.66 GB/s per PC = 32 B per 2 CK
	 * -> tCK 706 ps (~5.7 Gb/s/pin); 96 GiB */
	trn2_hbm = derive(&hbm3_6g4, "HBM3-5.7", "HBM3 timings in ns at 5.7 Gb/s (HARDWARE.md, derived)",
			  706, 4, 96ull << 30);
	/* trn3: 4.9 TB/s over 4 stacks x 32 PCs: 38.3 GB/s per PC -> tCK 418 ps
	 * (~9.6 Gb/s/pin, HBM3E class); 144 GiB */
	trn3_hbm = derive(&hbm3_6g4, "HBM3E-9.6", "HBM3 timings in ns at 9.6 Gb/s (HARDWARE.md, derived)",
			  418, 4, 144ull << 30);
	derived = true;
}

const dm_hbm_preset *dm_hbm_preset_get(const char *name)
{
	derive_all();
	const dm_hbm_preset *all[] = { &hbm2_2g, &hbm3_6g4, &trn1_hbm, &trn2_hbm, &trn3_hbm };
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (!strcmp(all[i]->name, name))
			return all[i];
	return NULL;
}

const dm_hbm_preset *dm_hbm_preset_for_target(int target)
{
	derive_all();
	switch (target) {
	case ISA_TARGET_trn1: return &trn1_hbm;
	case ISA_TARGET_trn2: return &trn2_hbm;
	case ISA_TARGET_trn3: return &trn3_hbm;
	default:              return NULL;
	}
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
