/*
 * hbm_ctrl.c -- the request-level HBM model: one FR-FCFS controller per
 * pseudo-channel with read and write queues (writes drain between
 * watermarks), open or closed page policy, all-bank or per-bank refresh.
 * Every command is checked against every constraint row (hbm_presets.c):
 * a command's earliest cycle is the latest "ready" time its bank, bank group
 * and pseudo-channel carry, and ACT also obeys the four-activate window.
 * One row command (ACT/PRE/REF) and one column command (RD/WR) may issue per
 * cycle, on HBM's separate row and column command buses.  Idle cycles are
 * skipped: the controller jumps to the next cycle anything can issue.
 */
#include "hbm.h"

#include <stdlib.h>
#include <string.h>

#define MAX_RULES 64

typedef struct rule {
	uint8_t  next, scope;
	uint32_t lat;
} rule;

typedef struct req {
	uint64_t arrive;          /* cycle */
	uint32_t bank;            /* bg * banks_per_group + bank */
	uint32_t row;
	uint8_t  write;
	uint8_t  outcome;         /* 0 row hit so far, 1 needed ACT, 2 needed PRE first */
} req;

/* a request queue with per-bank counts, so "does anyone want this row" and
 * "does anyone need a row command" are O(1) questions */
typedef struct pcq {
	req      *q;              /* ring of `cap` entries from `head`, oldest first */
	uint32_t  n, head, cap;
	uint16_t *tot, *hit;      /* per bank: queued, and queued hitting the open row */
	uint32_t  need_row;       /* queued requests whose row is not open */
	uint64_t  hitmask;        /* bit b: hit[b] > 0 (banks < 64) */
} pcq;

typedef struct pc_state {
	uint64_t clk;
	uint64_t ready[HBM_NUM_CMDS];
	uint64_t *bg_ready;       /* [bg][cmd] */
	uint64_t *bank_ready;     /* [bank][cmd] */
	int64_t  *open_row;       /* per bank, -1 closed */
	uint64_t  openmask;       /* bit b: bank b has a row open */
	uint64_t *bank_refresh;   /* per-bank refresh: next due cycle */
	uint64_t  faw[4];
	uint32_t  faw_n;
	uint64_t  next_ref;
	uint32_t  ref_bank;       /* per-bank refresh: next bank */
	bool      ref_due;
	pcq       rq, wq;
	bool      draining;
	uint64_t  last_done;
} pc_state;

struct dm_hbm {
	dm_hbm_preset  p;
	dm_hbm_config  cfg;
	uint32_t       npc, nbanks;
	rule           rules[HBM_NUM_CMDS][MAX_RULES];
	uint32_t       nrules[HBM_NUM_CMDS];
	uint32_t       faw_lat;
	pc_state      *pcs;
	dm_hbm_stats   stats;
	bool           per_bank_refresh;
	/* pending requests not yet in a controller queue, per PC (ring) */
	req          **pend;
	uint32_t      *pend_head, *pend_n, pend_cap;
	dm_hbm_issue  *log;
	uint32_t       log_cap, log_n;
	/* address fields as shifts when every geometry is a power of two */
	uint8_t        bank_bg[64];   /* bank -> its bank group */
	bool           pow2;
	uint32_t       sh_burst, sh_pc, sh_bg, sh_col, sh_bank;
};

static bool is_pow2(uint64_t x) { return x && !(x & (x - 1)); }
static uint32_t log2u(uint64_t x) { uint32_t n = 0; while (x > 1) { x >>= 1; n++; } return n; }

/* dm_hbm_map, with shifts where possible (the request path's hot spot) */
static dm_hbm_loc map_fast(const dm_hbm *h, uint64_t addr)
{
	if (!h->pow2)
		return dm_hbm_map(&h->p, addr);
	dm_hbm_loc l;
	uint64_t b = addr >> h->sh_burst;
	l.pc = (uint32_t)(b & (h->npc - 1));
	b >>= h->sh_pc;
	l.bg = (uint32_t)(b & (h->p.bankgroups - 1));
	b >>= h->sh_bg;
	l.col = (uint32_t)(b & (h->p.columns - 1));
	b >>= h->sh_col;
	l.bank = (uint32_t)(b & (h->p.banks_per_group - 1));
	b >>= h->sh_bank;
	l.row = (uint32_t)(b < h->p.rows ? b : b % h->p.rows);
	return l;
}

static uint64_t umax(uint64_t a, uint64_t b) { return a > b ? a : b; }
static uint64_t umin(uint64_t a, uint64_t b) { return a < b ? a : b; }

dm_hbm *dm_hbm_new(const dm_hbm_config *cfg)
{
	dm_hbm *h = calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	h->p = *cfg->preset;
	h->cfg = *cfg;
	if (!h->cfg.queue_depth)
		h->cfg.queue_depth = 64;
	h->npc = h->p.stacks * h->p.pcs_per_stack;
	h->nbanks = h->p.bankgroups * h->p.banks_per_group;
	h->per_bank_refresh = cfg->refresh < 0 ? h->p.per_bank_refresh : cfg->refresh == 1;
	if (h->nbanks > 64)
		goto fail;            /* bank masks and tables hold 64 banks */
	for (uint32_t b = 0; b < h->nbanks; b++)
		h->bank_bg[b] = (uint8_t)(b / h->p.banks_per_group);
	h->pow2 = is_pow2(h->p.burst_bytes) && is_pow2(h->npc) && is_pow2(h->p.bankgroups) &&
		  is_pow2(h->p.columns) && is_pow2(h->p.banks_per_group);
	h->sh_burst = log2u(h->p.burst_bytes);
	h->sh_pc = log2u(h->npc);
	h->sh_bg = log2u(h->p.bankgroups);
	h->sh_col = log2u(h->p.columns);
	h->sh_bank = log2u(h->p.banks_per_group);

	dm_hbm_constraint cons[MAX_RULES];
	uint32_t n = dm_hbm_constraints(&h->p, cons, MAX_RULES);
	for (uint32_t i = 0; i < n; i++) {
		if (cons[i].window > 1) {
			h->faw_lat = cons[i].latency;   /* the four-activate window */
			continue;
		}
		rule *r = &h->rules[cons[i].prev][h->nrules[cons[i].prev]++];
		r->next = cons[i].next;
		r->scope = cons[i].scope;
		r->lat = cons[i].latency;
	}
	h->pcs = calloc(h->npc, sizeof(pc_state));
	h->pend = calloc(h->npc, sizeof(req *));
	h->pend_head = calloc(h->npc, sizeof(uint32_t));
	h->pend_n = calloc(h->npc, sizeof(uint32_t));
	h->pend_cap = 1024;          /* a power of two: ring indices are masked */
	if (!h->pcs || !h->pend || !h->pend_head || !h->pend_n)
		goto fail;
	for (uint32_t i = 0; i < h->npc; i++) {
		pc_state *s = &h->pcs[i];
		s->bg_ready = calloc((size_t)h->p.bankgroups * HBM_NUM_CMDS, sizeof(uint64_t));
		s->bank_ready = calloc((size_t)h->nbanks * HBM_NUM_CMDS, sizeof(uint64_t));
		s->open_row = malloc(h->nbanks * sizeof(int64_t));
		s->bank_refresh = calloc(h->nbanks, sizeof(uint64_t));
		s->rq.q = malloc(h->cfg.queue_depth * sizeof(req));
		s->wq.q = malloc(h->cfg.queue_depth * sizeof(req));
		s->rq.cap = s->wq.cap = h->cfg.queue_depth;
		s->rq.tot = calloc(h->nbanks, sizeof(uint16_t));
		s->rq.hit = calloc(h->nbanks, sizeof(uint16_t));
		s->wq.tot = calloc(h->nbanks, sizeof(uint16_t));
		s->wq.hit = calloc(h->nbanks, sizeof(uint16_t));
		h->pend[i] = malloc(h->pend_cap * sizeof(req));
		if (!s->bg_ready || !s->bank_ready || !s->open_row || !s->bank_refresh || !s->rq.q ||
		    !s->wq.q || !h->pend[i] || !s->rq.tot || !s->rq.hit || !s->wq.tot || !s->wq.hit)
			goto fail;
		for (uint32_t b = 0; b < h->nbanks; b++) {
			s->open_row[b] = -1;
			/* per-bank refresh: banks take turns through each tREFI */
			s->bank_refresh[b] = (uint64_t)h->p.t[HBM_tREFI] * (b + 1) / h->nbanks;
		}
		s->next_ref = h->p.t[HBM_tREFI];
	}
	return h;
fail:
	dm_hbm_free(h);
	return NULL;
}

void dm_hbm_free(dm_hbm *h)
{
	if (!h)
		return;
	for (uint32_t i = 0; h->pcs && i < h->npc; i++) {
		free(h->pcs[i].bg_ready);
		free(h->pcs[i].bank_ready);
		free(h->pcs[i].open_row);
		free(h->pcs[i].bank_refresh);
		free(h->pcs[i].rq.q);
		free(h->pcs[i].wq.q);
		free(h->pcs[i].rq.tot);
		free(h->pcs[i].rq.hit);
		free(h->pcs[i].wq.tot);
		free(h->pcs[i].wq.hit);
		if (h->pend)
			free(h->pend[i]);
	}
	free(h->pcs);
	free(h->pend);
	free(h->pend_head);
	free(h->pend_n);
	free(h);
}

const dm_hbm_stats *dm_hbm_get_stats(const dm_hbm *h)
{
	return &h->stats;
}

uint64_t dm_hbm_latency_percentile(const dm_hbm *h, double q)
{
	uint64_t total = h->stats.reads, seen = 0;
	if (!total)
		return 0;
	for (uint32_t i = 0; i < 1024; i++) {
		seen += h->stats.latency_hist[i];
		if ((double)seen >= q * (double)total)
			return i < 1023 ? i : h->stats.latency_max;
	}
	return h->stats.latency_max;
}

void dm_hbm_log(dm_hbm *h, dm_hbm_issue *buf, uint32_t cap)
{
	h->log = buf;
	h->log_cap = cap;
	h->log_n = 0;
}

uint32_t dm_hbm_log_count(const dm_hbm *h)
{
	return h->log_n;
}

/* ------------------------------------------------------------- timing */

static uint64_t earliest(const dm_hbm *h, const pc_state *s, int cmd, uint32_t bank)
{
	uint32_t bg = h->bank_bg[bank];
	uint64_t t = umax(s->ready[cmd], umax(s->bg_ready[bg * HBM_NUM_CMDS + cmd],
					      s->bank_ready[bank * HBM_NUM_CMDS + cmd]));
	if (cmd == HBM_ACT && s->faw_n == 4)
		t = umax(t, s->faw[0] + h->faw_lat);
	return t;
}

/* PREA may issue once every open bank could take a PRE */
static uint64_t earliest_prea(const dm_hbm *h, const pc_state *s)
{
	uint64_t t = s->ready[HBM_PREA];
	for (uint32_t b = 0; b < h->nbanks; b++)
		if (s->open_row[b] >= 0)
			t = umax(t, earliest(h, s, HBM_PRE, b));
	return t;
}

static inline req *q_at(const pcq *q, uint32_t i)
{
	uint32_t k = q->head + i;
	return &q->q[k >= q->cap ? k - q->cap : k];
}

static void q_add(pcq *q, const req *r, const int64_t *open_row)
{
	*q_at(q, q->n++) = *r;
	q->tot[r->bank]++;
	if (open_row[r->bank] == (int64_t)r->row) {
		q->hit[r->bank]++;
		q->hitmask |= 1ull << (r->bank & 63);
	} else {
		q->need_row++;
	}
}

static void q_remove(pcq *q, uint32_t i, const int64_t *open_row)
{
	const req *r = q_at(q, i);
	q->tot[r->bank]--;
	if (open_row[r->bank] == (int64_t)r->row) {
		if (--q->hit[r->bank] == 0)
			q->hitmask &= ~(1ull << (r->bank & 63));
	} else {
		q->need_row--;
	}
	/* close the gap from the front: removals are mostly near the head */
	for (uint32_t k = i; k > 0; k--)
		*q_at(q, k) = *q_at(q, k - 1);
	q->head = q->head + 1 == q->cap ? 0 : q->head + 1;
	q->n--;
}

/* a bank's open row changed: recount its hits (ACT: a scan; PRE: none) */
static void q_reopen(pcq *q, uint32_t bank, int64_t row)
{
	uint32_t hits = 0;
	if (row >= 0 && q->tot[bank])
		for (uint32_t i = 0; i < q->n; i++)
			hits += q_at(q, i)->bank == bank && (int64_t)q_at(q, i)->row == row;
	q->need_row += q->hit[bank];
	q->need_row -= hits;
	q->hit[bank] = (uint16_t)hits;
	if (hits)
		q->hitmask |= 1ull << (bank & 63);
	else
		q->hitmask &= ~(1ull << (bank & 63));
}

static void bank_changed(pc_state *s, uint32_t bank)
{
	q_reopen(&s->rq, bank, s->open_row[bank]);
	q_reopen(&s->wq, bank, s->open_row[bank]);
}

static void issue(dm_hbm *h, pc_state *s, uint32_t pc, int cmd, uint32_t bank, uint32_t row,
		  uint64_t t)
{
	uint32_t bg = bank / h->p.banks_per_group;
	for (uint32_t i = 0; i < h->nrules[cmd]; i++) {
		const rule *r = &h->rules[cmd][i];
		uint64_t *slot;
		if (r->scope == HBM_SCOPE_PC || cmd == HBM_PREA || cmd == HBM_REFAB)
			slot = &s->ready[r->next];
		else if (r->scope == HBM_SCOPE_BG)
			slot = &s->bg_ready[bg * HBM_NUM_CMDS + r->next];
		else
			slot = &s->bank_ready[bank * HBM_NUM_CMDS + r->next];
		*slot = umax(*slot, t + r->lat);
	}
	switch (cmd) {
	case HBM_ACT:
		if (s->faw_n == 4) {
			memmove(s->faw, s->faw + 1, 3 * sizeof(uint64_t));
			s->faw_n = 3;
		}
		s->faw[s->faw_n++] = t;
		s->open_row[bank] = row;
		s->openmask |= 1ull << bank;
		bank_changed(s, bank);
		h->stats.acts++;
		break;
	case HBM_PRE:
		s->open_row[bank] = -1;
		s->openmask &= ~(1ull << bank);
		bank_changed(s, bank);
		h->stats.pres++;
		break;
	case HBM_PREA:
		for (uint32_t b = 0; b < h->nbanks; b++) {
			if (s->open_row[b] >= 0) {
				s->open_row[b] = -1;
				bank_changed(s, b);
			}
		}
		s->openmask = 0;
		h->stats.pres++;
		break;
	case HBM_REFAB:
	case HBM_REFPB:
		h->stats.refreshes++;
		break;
	default:
		break;
	}
	if (h->log && h->log_n < h->log_cap) {
		dm_hbm_issue e = { t, (uint8_t)cmd, pc, bg, bank % h->p.banks_per_group, row };
		h->log[h->log_n++] = e;
	}
}

static bool row_has_hits(const pcq *q, uint32_t bank, int64_t row)
{
	(void)row;   /* row is always the bank's open row here */
	return q->hit[bank] != 0;
}

/*
 * One scheduling step at cycle s->clk.  Returns true if a command issued;
 * otherwise *next gets the earliest cycle something could.
 */
static bool step(dm_hbm *h, pc_state *s, uint32_t pc, uint64_t *next)
{
	uint64_t t = s->clk, wake = UINT64_MAX;
	bool issued = false;

	/* refresh */
	if (h->cfg.refresh_on && !h->per_bank_refresh && (s->ref_due || t >= s->next_ref)) {
		s->ref_due = true;
		bool open = false;
		for (uint32_t b = 0; b < h->nbanks; b++)
			open |= s->open_row[b] >= 0;
		if (open) {
			uint64_t e = earliest_prea(h, s);
			if (e <= t) {
				issue(h, s, pc, HBM_PREA, 0, 0, t);
				return true;
			}
			*next = e;
			return false;
		}
		uint64_t e = s->ready[HBM_REFAB];
		if (e <= t) {
			issue(h, s, pc, HBM_REFAB, 0, 0, t);
			s->ref_due = false;
			s->next_ref += h->p.t[HBM_tREFI];
			return true;
		}
		*next = e;
		return false;
	}
	int ref_bank = -1;
	if (h->cfg.refresh_on && h->per_bank_refresh) {
		uint32_t b = s->ref_bank;
		if (t >= s->bank_refresh[b]) {
			ref_bank = (int)b;
			if (s->open_row[b] >= 0) {
				uint64_t e = earliest(h, s, HBM_PRE, b);
				if (e <= t) {
					issue(h, s, pc, HBM_PRE, b, 0, t);
					return true;
				}
				wake = umin(wake, e);
			} else {
				uint64_t e = earliest(h, s, HBM_REFPB, b);
				if (e <= t) {
					issue(h, s, pc, HBM_REFPB, b, 0, t);
					s->bank_refresh[b] += h->p.t[HBM_tREFI];
					s->ref_bank = (b + 1) % h->nbanks;
					return true;
				}
				wake = umin(wake, e);
			}
		} else {
			wake = umin(wake, s->bank_refresh[b]);
		}
	}

	/* write draining between watermarks; reads first otherwise */
	uint32_t qd = h->cfg.queue_depth;
	if (s->wq.n >= qd * 3 / 4 || (s->rq.n == 0 && s->wq.n))
		s->draining = true;
	if (s->draining && (s->wq.n == 0 || (s->wq.n <= qd / 4 && s->rq.n)))
		s->draining = false;
	pcq *q = s->draining ? &s->wq : &s->rq;

	/* column command: oldest ready row hit.  The queue holds one kind of
	 * request, so readiness is per bank: compute it once for each bank with
	 * hits, then take the oldest request of a ready bank. */
	int ccmd = q == &s->wq ? HBM_WR : HBM_RD;
	uint64_t bank_e[64];
	bool any_ready = false;
	for (uint32_t b = 0; b < h->nbanks && b < 64; b++)
		bank_e[b] = UINT64_MAX;
	for (uint64_t m = q->hitmask; m; m &= m - 1) {
		uint32_t b = (uint32_t)__builtin_ctzll(m);
		if ((int)b == ref_bank)
			continue;
		bank_e[b] = earliest(h, s, ccmd, b);
		if (bank_e[b] <= t)
			any_ready = true;
		else
			wake = umin(wake, bank_e[b]);
	}
	for (uint32_t i = 0; any_ready && i < q->n; i++) {
		req *r = q_at(q, i);
		if (bank_e[r->bank] > t || s->open_row[r->bank] != (int64_t)r->row)
			continue;
		issue(h, s, pc, ccmd, r->bank, r->row, t);
		uint64_t first = t + (r->write ? h->p.t[HBM_CWL] : h->p.t[HBM_CL]);
		uint64_t done = first + h->p.t[HBM_nBL];
		s->last_done = umax(s->last_done, done);
		if (r->write) {
			h->stats.writes++;
		} else {
			h->stats.reads++;
			uint64_t lat = first - r->arrive;
			h->stats.latency_sum += lat;
			h->stats.latency_max = umax(h->stats.latency_max, lat);
			h->stats.latency_hist[lat < 1023 ? lat : 1023]++;
		}
		h->stats.bytes += h->p.burst_bytes;
		if (r->outcome == 0)
			h->stats.row_hits++;
		else if (r->outcome == 1)
			h->stats.row_misses++;
		else
			h->stats.row_conflicts++;
		q_remove(q, i, s->open_row);
		issued = true;
		break;
	}

	/* row command: oldest request needing ACT, or PRE of a row nobody wants */
	for (uint32_t i = 0; q->need_row && i < q->n; i++) {
		req *r = q_at(q, i);
		if ((int)r->bank == ref_bank)
			continue;
		int64_t open = s->open_row[r->bank];
		int cmd;
		if (open == (int64_t)r->row)
			continue;                                 /* a hit: column side */
		if (open < 0) {
			cmd = HBM_ACT;
		} else {
			if (row_has_hits(q, r->bank, open))
				continue;                         /* let the hits drain first */
			cmd = HBM_PRE;
		}
		uint64_t e = umax(earliest(h, s, cmd, r->bank), r->arrive);
		if (e > t) {
			wake = umin(wake, e);
			continue;
		}
		/* row-buffer outcome of this request: conflict if it had to close a row */
		if (cmd == HBM_PRE)
			r->outcome = 2;
		else if (r->outcome == 0)
			r->outcome = 1;
		issue(h, s, pc, cmd, r->bank, r->row, t);
		issued = true;
		break;
	}
	/* closed page: precharge open rows no queued request wants */
	if (h->cfg.page == HBM_CLOSED_PAGE && !issued) {
		uint64_t idle = s->openmask & ~(s->rq.hitmask | s->wq.hitmask);
		for (; idle; idle &= idle - 1) {
			uint32_t b = (uint32_t)__builtin_ctzll(idle);
			uint64_t e = earliest(h, s, HBM_PRE, b);
			if (e <= t) {
				issue(h, s, pc, HBM_PRE, b, 0, t);
				issued = true;
				break;
			}
			wake = umin(wake, e);
		}
	}
	*next = wake;
	return issued;
}

/* Runs PC `pc` until its pending list is empty and, with `all`, its queues
 * too.  (Stopping with requests still queued keeps the controller's look-ahead
 * when more of the same transfer is about to be pushed.) */
static void drain_pc(dm_hbm *h, uint32_t pc, bool all)
{
	pc_state *s = &h->pcs[pc];
	uint32_t qd = h->cfg.queue_depth;
	for (;;) {
		/* admit pending requests that have arrived, in order */
		while (h->pend_n[pc]) {
			req *r = &h->pend[pc][h->pend_head[pc]];
			pcq *q = r->write ? &s->wq : &s->rq;
			if (q->n == qd)
				break;
			if (r->arrive > s->clk) {
				if (!s->rq.n && !s->wq.n)
					s->clk = r->arrive;
				else
					break;
			}
			q_add(q, r, s->open_row);
			h->pend_head[pc] = (h->pend_head[pc] + 1) & (h->pend_cap - 1);
			h->pend_n[pc]--;
		}
		if (!h->pend_n[pc] && (!all || (!s->rq.n && !s->wq.n)))
			return;
		uint64_t next;
		if (step(h, s, pc, &next)) {
			s->clk++;
			continue;
		}
		/* nothing could issue: jump to the next possible cycle (or arrival) */
		if (h->pend_n[pc]) {
			uint64_t a = h->pend[pc][h->pend_head[pc]].arrive;
			if (a > s->clk)
				next = umin(next, a);
		}
		s->clk = next == UINT64_MAX || next <= s->clk ? s->clk + 1 : next;
	}
}

static void push_req(dm_hbm *h, uint64_t arrive, uint64_t addr, bool write)
{
	dm_hbm_loc l = map_fast(h, addr);
	if (h->pend_n[l.pc] == h->pend_cap)
		drain_pc(h, l.pc, false);
	uint32_t slot = (h->pend_head[l.pc] + h->pend_n[l.pc]) & (h->pend_cap - 1);
	req r = { arrive, l.bg * h->p.banks_per_group + l.bank, l.row, write, 0 };
	h->pend[l.pc][slot] = r;
	h->pend_n[l.pc]++;
}

void dm_hbm_submit(dm_hbm *h, uint64_t start_ps, uint64_t addr, bool write)
{
	push_req(h, start_ps / h->p.tck_ps, addr, write);
}

uint64_t dm_hbm_drain(dm_hbm *h)
{
	uint64_t end = 0;
	for (uint32_t pc = 0; pc < h->npc; pc++) {
		drain_pc(h, pc, true);
		end = umax(end, h->pcs[pc].last_done);
	}
	return end * h->p.tck_ps;
}

uint64_t dm_hbm_transfer(dm_hbm *h, uint64_t start_ps, uint64_t addr, uint64_t bytes,
			 uint64_t stride, bool write)
{
	return dm_hbm_stream(h, start_ps, addr, bytes, stride, write ? HBM_WRITES : HBM_READS);
}

uint64_t dm_hbm_stream(dm_hbm *h, uint64_t start_ps, uint64_t addr, uint64_t bytes,
		       uint64_t stride, int mode)
{
	uint64_t arrive = start_ps / h->p.tck_ps;
	uint64_t bb = h->p.burst_bytes, n = (bytes + bb - 1) / bb;
	if (!stride)
		stride = bb;
	for (uint32_t pc = 0; pc < h->npc; pc++)
		h->pcs[pc].last_done = 0;
	for (uint64_t i = 0; i < n; i++)
		push_req(h, arrive, addr + i * stride,
			 mode == HBM_WRITES || (mode == HBM_MIXED && (i & 1)));
	uint64_t end = arrive;
	for (uint32_t pc = 0; pc < h->npc; pc++) {
		drain_pc(h, pc, true);
		end = umax(end, h->pcs[pc].last_done);
	}
	return end * h->p.tck_ps;
}

uint64_t dm_hbm_request(dm_hbm *h, uint64_t start_ps, uint64_t addr, bool write)
{
	uint64_t before = h->stats.latency_sum;
	uint64_t arrive = start_ps / h->p.tck_ps;
	dm_hbm_loc l = dm_hbm_map(&h->p, addr);
	h->pcs[l.pc].last_done = 0;
	push_req(h, arrive, addr, write);
	drain_pc(h, l.pc, true);
	if (!write)
		return (arrive + (h->stats.latency_sum - before)) * h->p.tck_ps;
	return h->pcs[l.pc].last_done * h->p.tck_ps;
}
