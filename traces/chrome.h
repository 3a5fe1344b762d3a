/*
 * chrome.h -- Chrome trace-event JSON writer (chrome://tracing, Perfetto UI).
 * One process per NeuronCore; one thread (track) per engine and per DMA
 * queue; instructions and DMA slices are complete ("X") events with their
 * operands as args; semaphores are counters.  Streams to disk as events
 * arrive, so memory stays bounded.
 */
#ifndef NSIM_TRC_CHROME_H
#define NSIM_TRC_CHROME_H

#include <stdio.h>

#include "observer.h"

typedef struct trc_chrome {
	FILE         *f;
	int           events;
	unsigned char named[64][64];   /* core x track: metadata written */
	trc_observer  obs;             /* hooks bound to this writer */
} trc_chrome;

/* 0 on success, -1 if the file cannot be created */
int  trc_chrome_open(trc_chrome *w, const char *path);
/* closes the JSON array; 0, or -1 on a write error */
int  trc_chrome_close(trc_chrome *w);

#define TRC_TRACK_DMA_BASE 16          /* track id of DMA queue q: 16 + q */

#endif
