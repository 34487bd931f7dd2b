/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the table of leaf modes (lib/modes/mode.h). A new mode is one file with
 * its ops and one line here.
 */
#include "mode.h"

/* Plain per-flow queues: the worker's defaults are the whole mode. */
const struct weir_mode_ops weir_mode_pfq = {
	.name = "pfq",
};

/* One queue for the class (the paper's "pure CBQ"). */
const struct weir_mode_ops weir_mode_fifo = {
	.name = "fifo",
	.flags = WEIR_MODEF_SHARED_QUEUE,
};

const struct weir_mode_ops *const weir_modes[WEIR_MODE__COUNT] = {
	[WEIR_MODE_POSTACK] = &weir_mode_postack,
	[WEIR_MODE_PFQ] = &weir_mode_pfq,
	[WEIR_MODE_FIFO] = &weir_mode_fifo,
	[WEIR_MODE_TCR] = &weir_mode_tcr,
	[WEIR_MODE_PACED] = &weir_mode_paced,
	[WEIR_MODE_IPABR] = &weir_mode_ipabr,
	[WEIR_MODE_PEP] = &weir_mode_pep,
};

const struct weir_mode_ops *const weir_mode_keeper = &weir_mode_pep;

const char *
weir_shape_mode_name(unsigned int mode)
{
	return mode < WEIR_MODE__COUNT ? weir_modes[mode]->name : "?";
}
