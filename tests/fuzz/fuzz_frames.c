// SPDX-License-Identifier: MIT
/*
 * fuzz_frames: the server's frame decoder, end to end, on arbitrary byte
 * streams from clients.
 *
 * Setup (once): the four servers of fuzz_server.h (server 1 or 0 of a
 * 2-server job, with or without the secret; tables of both kinds, a graph,
 * a checkpoint directory, small budgets) on 127.0.0.1. rdps_random_bytes is
 * deterministic in the fuzz build, so seeds carry valid AUTH frames (see
 * fuzz_seeds.c).
 *
 * Input: byte 0 is flags: bit 0 picks a server with the secret, bit 2
 * server 0 (else 1); bit 1 opens two connections (then bytes 1-2,
 * little-endian, give the length of the first connection's stream, the
 * rest is the second's); bit 3 makes the connections come from elsewhere
 * (127.0.0.2, not loopback to the server: protected mode, observers that
 * are not admins); bits 4-7 pick the chunk size the harness sends in (0:
 * all at once), with the server polled after every chunk, so frames arrive
 * split at every offset.
 *
 * Drives: everything a client reaches over TCP: accept, sconn_read,
 * sconn_process (header checks, per-type caps with payloads skipped,
 * budgets, partial frames, realignment), handle_frame, handle_hello,
 * handle_auth, admit, protected mode, every request type with the server
 * core's checks (job membership, table index, row ids, read-only tables,
 * non-finite gradients, table create/lookup/drop/set_optimizer against the
 * table budget, sampling over the graph, checkpoints, collectives across
 * the two connections, observers), refusals, deferred replies, sconn_flush
 * and the close of a connection (BYE).
 *
 * Asserts (fuzz_check_stream): only well-formed frames back, the handshake
 * in order, no success reply before the welcome, every success reply of a
 * known kind with the size and layout of its rule, observers answered only
 * what they may ask; the servers' memory within their budgets while the
 * input runs; the server settles (polling ends with no pending event, a
 * checkpoint thread ends).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "fuzz_server.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const size_t chunk_sizes[16] = { 0,  1,  2,   3,   5,   7,   8,    13,
					16, 17, 24, 100, 255, 512, 1000, 4096 };

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet_logs();
	fuzz_servers_start();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_conn conns[2];
	const uint8_t *stream[2];
	size_t len[2], chunk;
	struct fuzz_server *fs;
	int nconns, flags;

	if (size < 1)
		return 0;
	flags = data[0];
	fs = &fuzz_servers[(flags & 1 ? FUZZ_SRV_SECRET : 0) | (flags & 4 ? FUZZ_SRV_ZERO : 0)];
	chunk = chunk_sizes[flags >> 4];
	data++;
	size--;
	if (flags & 2 && size >= 2) {
		size_t first = (size_t)data[0] | (size_t)data[1] << 8;

		data += 2;
		size -= 2;
		if (first > size)
			first = size;
		nconns = 2;
		stream[0] = data;
		len[0] = first;
		stream[1] = data + first;
		len[1] = size - first;
	} else {
		nconns = 1;
		stream[0] = data;
		len[0] = size;
	}
	fuzz_input_begin(fs);
	for (int i = 0; i < nconns; i++) {
		int obs = fuzz_stream_observer(stream[i], len[i]);

		fuzz_scan_requests(stream[i], len[i]);
		fuzz_conn_open(&conns[i], fs, flags & 8, true);
		conns[i].observer_known = obs >= 0;
		conns[i].observer = obs == 1;
	}
	for (int i = 0; i < nconns; i++)
		fuzz_send(fs, conns, nconns, &conns[i], stream[i], len[i], chunk);
	fuzz_settle(fs, conns, nconns);
	/* Leave one at a time: the other may get a failed collective. */
	for (int i = 0; i < nconns; i++)
		fuzz_conn_shut(fs, conns, nconns, &conns[i]);
	for (int i = 0; i < nconns; i++) {
		fuzz_check_stream(fs, &conns[i], NULL, NULL, NULL);
		fuzz_conn_close(&conns[i]);
	}
	fuzz_input_end(fs);
	return 0;
}
