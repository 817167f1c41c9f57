/*
 * verbs_credits.pml: the verbs backend's push protocol (clients SEND into
 * receive slots the server keeps posted on one shared receive queue, under
 * credits), checked exhaustively with spin by tests/spin/check.sh (ctest
 * spin/verbs_credits; tests/spin/README.md says how to read a trail).
 *
 * Mirrors transport/verbs_recv_pool.c (slot pool, credit accounting),
 * transport/verbs_srv_cq.c (completions, regrant, credit messages),
 * transport/verbs_server.c (accept) and transport/verbs_worker.c
 * (teardown), step by step. With several server threads each has its own
 * pool and sessions: one instance of this model per thread, its share of
 * the job being ceil(job size / threads) (the listener balances sessions):
 *   accept()       session_accept -> verbs_srv_admit -> verbs_pool_grant:
 *                  g = min(share, free_credits) promised to the session,
 *                  sent in the connection reply.
 *   poll_one()     on_recv, one receive completion, success or error, in CQ
 *                  order: the slot is posted again (verbs_pool_post; the
 *                  code handles the message first, from the slot's buffer),
 *                  verbs_pool_return (promised--, free++), the message
 *                  handled (PUSH applied, FLUSH: ack queued, error
 *                  completion of a live session: learn()), then
 *                  verbs_srv_regrant, the ack, credit messages. (The code
 *                  regrants once per batch of completions; granting only
 *                  ever hands out free credits, so when it runs does not
 *                  change what is safe.)
 *   regrant()      verbs_srv_regrant: LIVE sessions below the share, in the
 *                  order they came to be below it (the worker's grant queue:
 *                  a session joins it when admitted short of its share,
 *                  when a completion returns one of its credits, and when
 *                  the share grows; the code visits only these, not every
 *                  session per batch), get min(share - promised,
 *                  free_credits), owed until sent; one that the free credits
 *                  could not fill stays first in line.
 *   send_credits() session_send: a credit message to each LIVE session owed
 *                  at least max(1, share / 2); a flush ack carries all that
 *                  is owed.
 *   learn()        verbs_session_close (control connection closed, CM
 *                  disconnect, error completion, async QP error): no longer
 *                  LIVE (out of the share), QP to ERROR, wait for
 *                  LAST_WQE_REACHED.
 *   destroy()      verbs_session_reap (+ verbs_session_destroy by thread 0),
 *                  once LAST_WQE_REACHED came (or its
 *                  bounded wait ran out) and a drain of the CQ that started
 *                  after it is done: destroy the QP, verbs_pool_release
 *                  (free_credits += promised), forget the session.
 *   client         credits from the reply, credit messages and flush acks;
 *                  a PUSH or FLUSH takes one; flush() waits for its ack;
 *                  disconnecting is torn down like a death.
 *   nic            each QP's messages in order into any posted slot; a QP
 *                  may go to ERROR by itself once its peer is gone; a
 *                  message cut short completes with an error; destroying a
 *                  QP removes its completions from the CQ without
 *                  re-posting their slots (mlx5).
 *
 * One change to the first design: the share is S / max(live sessions, the
 * job's clients) (num_clients of the connection request), not S / live
 * sessions. With live sessions only, an early session keeps S / 1 credits;
 * idle at a barrier it starves a late one granted 0 for ever
 * (-DSHARE_BY_LIVE -DBARRIER finds it).
 *
 * Properties (assertions; pan also reports any state where a process is
 * stuck, e.g. a client waiting forever for credits or a teardown that never
 * ends):
 *   P1 no overrun: an arriving message always finds a posted slot
 *      (take_slot: posted > 0).
 *   P2 no lost slot: no slot is lost when a QP is destroyed (destroy:
 *      lost == 0), no slot is posted twice (repost: slot[s] == BUSY),
 *      free_credits + sum promised == slots posted + slots taken by a QP at
 *      every step (check), and at quiescence every slot is posted and
 *      free_credits == S.
 *   P3 flush: when a flush returns, every push its client sent before it
 *      has been applied (client: applied[c] >= mark).
 *   P4 credits never exceed what is posted: sum over clients of credits
 *      held + credits on the way to them + owed + messages in flight <=
 *      slots posted (check), and free_credits >= 0.
 *
 * Controls (each must make spin find a violation):
 *   -DOLD_FIXED_CREDITS    every session gets OLD_C credits whatever S is
 *                          (the old policy): P1 fails. P4 is not checked in
 *                          this variant: it fails already when the third
 *                          session is granted its credits, before any
 *                          message can overrun.
 *   -DDESTROY_BEFORE_DRAIN the QP is destroyed as soon as the server learns
 *                          of the death (the old order): P2 fails.
 *   -DSKIP_LAST_WQE        the server drains the CQ without waiting for
 *                          LAST_WQE_REACHED: P2 fails (a message being
 *                          received completes after the drain).
 *   -DGRANT_BEFORE_REPOST  credits for a completed slot are sent before the
 *                          slot is re-posted (the old drain_cq order): P4
 *                          fails.
 *   -DSHARE_BY_LIVE        the share divides S by live sessions only; with
 *                          -DBARRIER a client waits forever for credits an
 *                          idle one holds: pan reports an invalid end state.
 *   -DNO_REQUEUE           a completion returns its session's credit but does
 *                          not put the session back on the grant queue (the
 *                          regrant visits only queued sessions): a client
 *                          waits forever for credits: an invalid end state.
 *
 * Run: tests/spin/check.sh (ctest spin/verbs_credits); see tests/spin/README.md.
 */

#ifndef S
#define S 4			/* receive slots on the SRQ */
#endif
#ifndef MAXC
#define MAXC 4			/* cap on a session's share */
#endif
#ifndef OLD_C
#define OLD_C 2			/* OLD_FIXED_CREDITS: credits per session */
#endif
#ifndef PUSHES
#define PUSHES 2		/* pushes before each flush */
#endif
#ifndef ROUNDS
#define ROUNDS 1		/* (PUSHES pushes, one flush) per client */
#endif
#ifndef MORTAL
#define MORTAL 1		/* 1: any one client may die at any point */
#endif
#ifndef NCLIENTS
#define NCLIENTS 3		/* clients that run (at most NC) */
#endif
/* REPLACE (with NCLIENTS 2): a third client replaces the mortal one once it
 * died, possibly while the server still tears the dead session down. */
#if defined(REPLACE) && NCLIENTS != 2
#error "REPLACE needs NCLIENTS 2: client 2 is the replacement"
#endif
/* BARRIER: a client that finished its program waits until every other one
 * finished (or died) before it disconnects, as training clients do at the
 * end of an epoch; meanwhile it holds its unused credits. */

#define NC 3			/* session slots; SERVER_SESSION and NIC_QP expand 0..2 */
#define NOPS (ROUNDS * (PUSHES + 1))
#define NONE 255
#define DOWN_DEPTH (S + 2)	/* reply + credit messages (>= 1 credit each) + ack */

/* slot[] */
#define POSTED 0
#define BUSY 1			/* taken by a QP: being received or its completion is in the CQ */
#define LOST 2			/* neither posted nor ever completed */

/* client -> server messages, and receive completions */
#define K_PUSH 1
#define K_FLUSH 2
#define K_ERR 3			/* completion with an error status: contents invalid */

/* server -> client messages */
#define D_REPLY 1		/* connection reply, carries the first grant */
#define D_CREDIT 2		/* SEND_WITH_IMM with a credit count */
#define D_ACK 3			/* flush ack, carries what is owed */

/* sstate[] */
#define NOSESS 0
#define LIVE 1
#define WAIT_LAST_WQE 2		/* QP in ERROR, LAST_WQE_REACHED not seen yet */
#define DRAIN 3			/* LAST_WQE_REACHED seen: drain the CQ, then destroy */

#ifdef OLD_FIXED_CREDITS
#define SHARE OLD_C
#define CAN_GRANT true
#define GRANT(want) (want)
#else
/* The share divides S by the live sessions, but never by fewer than the
 * job's clients (num_clients of the connection request): an early session
 * granted S / 1 keeps what it does not use, and once idle (at a barrier)
 * starves a late one granted 0. SHARE_BY_LIVE divides by live sessions only
 * (the first design); tests/spin/README.md shows its deadlock. */
#ifdef SHARE_BY_LIVE
#define SESSIONS (nlive == 0 -> 1 : nlive)
#else
#define SESSIONS (nlive > NCLIENTS -> nlive : NCLIENTS)
#endif
#define SHARE (S / SESSIONS >= MAXC -> MAXC : (S / SESSIONS < 1 -> 1 : S / SESSIONS))
#define CAN_GRANT (free_credits > 0)
#define GRANT(want) ((want) < free_credits -> (want) : free_credits)
#endif
#define THRESHOLD (SHARE / 2 < 1 -> 1 : SHARE / 2)
/* A credit message goes when owed reaches the threshold; a flush ack takes
 * whatever is owed. */
#define SEND_OWED(s) (owed[s] >= THRESHOLD)

/* The SRQ and the CQ (one for all sessions). */
byte slot[S];			/* POSTED at start */
byte posted = S;		/* slots in state POSTED */
byte busy;			/* slots in state BUSY */
byte lost;			/* slots in state LOST */
byte cq_sess[S];		/* receive completions in CQ order */
byte cq_slot[S];
byte cq_kind[S];
byte cq_len;
byte cq_of[NC];			/* completions of each session in the CQ */
byte recv_slot[NC] = NONE;	/* slot of a message being received when the QP failed */
bool qp_err[NC];		/* the server's QP is in ERROR */

/* Server (verbs_recv_pool.c, verbs_server.c); session id == client id. */
short free_credits = S;		/* credits promised to no session */
byte sstate[NC];
byte promised[NC];		/* granted, not yet returned by a completion */
byte owed[NC];			/* granted, not yet sent */
byte applied[NC];		/* pushes applied */
byte nlive;			/* sessions in state LIVE */
chan gq = [NC] of { byte };	/* the grant queue: sessions below the share, in order */
bool gqueued[NC];		/* ... on it */
#ifdef GRANT_BEFORE_REPOST
byte unposted = NONE;		/* slot completed, credit granted, not re-posted yet */
#endif

/* Clients and the network. */
bool creq[NC];			/* connection request not yet accepted */
bool dead[NC];
bool finished[NC];		/* done with its program (BARRIER) */
bool closed[NC];		/* finished its program and disconnected */
byte credits[NC];		/* held */
byte transit[NC];		/* in server -> client messages not yet read */
byte inflight[NC];		/* messages sent, not yet in a slot */
chan wire[NC] = [S] of { byte };		/* client -> server QP, in order */
chan down[NC] = [DOWN_DEPTH] of { byte, byte };	/* server -> client: kind, count */
byte mortal = NONE;		/* the client that may die */

/* Scratch for atomic steps: not part of the state. */
hidden byte cs, cslot, ckind, x, y, st, g, held;
hidden byte ack;

#define GONE(c) (dead[c] || closed[c])

inline check()
{
	assert(free_credits + promised[0] + promised[1] + promised[2] == posted + busy);
	assert(posted + busy + lost == S);
#ifndef OLD_FIXED_CREDITS
	assert(free_credits >= 0);
	held = credits[0] + transit[0] + owed[0] + inflight[0] +
	       credits[1] + transit[1] + owed[1] + inflight[1] +
	       credits[2] + transit[2] + owed[2] + inflight[2];
	assert(held <= posted);	/* P4 */
	held = 0;
#endif
	/* Every promised credit is somewhere (a gone client's held ones vanish). */
	x = 0;
	do
	:: x < NC ->
		if
		:: sstate[x] != NOSESS && !GONE(x) ->
			assert(promised[x] == credits[x] + transit[x] + owed[x] + inflight[x] +
			       cq_of[x] + (recv_slot[x] != NONE -> 1 : 0))
		:: sstate[x] != NOSESS && GONE(x) ->
			assert(promised[x] >= owed[x] + inflight[x] + cq_of[x] +
			       (recv_slot[x] != NONE -> 1 : 0))
		:: else -> assert(promised[x] == 0)
		fi;
		x++
	:: else -> break
	od;
	x = 0
}

/* A message arrives: it takes the lowest posted slot (slots are
 * interchangeable, so this loses no behaviour). */
inline take_slot()
{
	assert(posted > 0);	/* P1: no overrun */
	cslot = 0;
	do
	:: slot[cslot] == POSTED -> break
	:: else -> cslot++
	od;
	slot[cslot] = BUSY;
	posted--;
	busy++
}

inline repost(s)
{
	assert(slot[s] == BUSY);	/* P2: never posted twice */
	slot[s] = POSTED;
	posted++;
	busy--
}

inline cq_push(c, s, kind)
{
	assert(cq_len < S);
	cq_sess[cq_len] = c;
	cq_slot[cq_len] = s;
	cq_kind[cq_len] = kind;
	cq_len++;
	cq_of[c]++
}

inline cq_pop()
{
	cs = cq_sess[0];
	cslot = cq_slot[0];
	ckind = cq_kind[0];
	x = 1;
	do
	:: x < cq_len ->
		cq_sess[x - 1] = cq_sess[x];
		cq_slot[x - 1] = cq_slot[x];
		cq_kind[x - 1] = cq_kind[x];
		x++
	:: else -> break
	od;
	cq_len--;
	cq_sess[cq_len] = 0;
	cq_slot[cq_len] = 0;
	cq_kind[cq_len] = 0;
	cq_of[cs]--
}

/* mlx5 destroy_qp: the QP's completions leave the CQ and their WQEs go back
 * to the SRQ's free list, not to the posted list. */
inline cq_purge(c)
{
	x = 0;
	y = 0;
	do
	:: x < cq_len ->
		if
		:: cq_sess[x] == c ->
			slot[cq_slot[x]] = LOST;
			busy--;
			lost++
		:: else ->
			cq_sess[y] = cq_sess[x];
			cq_slot[y] = cq_slot[x];
			cq_kind[y] = cq_kind[x];
			y++
		fi;
		x++
	:: else -> break
	od;
	x = y;
	do
	:: x < cq_len ->
		cq_sess[x] = 0;
		cq_slot[x] = 0;
		cq_kind[x] = 0;
		x++
	:: else -> break
	od;
	cq_len = y;
	cq_of[c] = 0;
	x = 0;
	y = 0
}

/* A send to a client that is gone fails; its credits stay in promised[]
 * and come back when the session is destroyed. */
inline send_down(c, kind, n)
{
	if
	:: GONE(c) -> skip
	:: else ->
		assert(nfull(down[c]));
		down[c]!kind,n;
		transit[c] = transit[c] + n;
		if
		:: kind == D_REPLY -> printf("server: reply to client %d, %d credits\n", c, n)
		:: kind == D_CREDIT -> printf("server: credit message to client %d, %d\n", c, n)
		:: kind == D_ACK -> printf("server: flush ack to client %d, %d credits\n", c, n)
		fi
	fi
}

/* Moving to ERROR (by the server, or by the NIC after the peer vanished):
 * the QP consumes no more slots; a message it was receiving completes with
 * an error later (nic), the rest of what was in flight is dropped. */
inline qp_to_error(c)
{
	if
	:: qp_err[c] -> skip
	:: else ->
		qp_err[c] = 1;
		printf("QP %d -> ERROR\n", c);
		if
		:: nempty(wire[c]) ->	/* its head was being received */
			wire[c]?ckind;
			inflight[c]--;
			take_slot();
			recv_slot[c] = cslot;
			printf("nic: QP %d was receiving into slot %d\n", c, cslot)
		:: true -> skip
		fi;
		do
		:: wire[c]?ckind -> inflight[c]--
		:: empty(wire[c]) -> break
		od
	fi
}

/* verbs_srv_cq.c q_push(VERBS_Q_GRANT): a LIVE session below its share
 * joins the grant queue (once). */
inline gq_push(c)
{
	if
	:: sstate[c] == LIVE && !gqueued[c] && promised[c] < SHARE ->
		gq!c;
		gqueued[c] = 1
	:: else -> skip
	fi
}

/* The share grew (a session left it): every LIVE session may take more. */
inline gq_push_all()
{
	x = 0;
	do
	:: x < NC -> gq_push(x); x++
	:: else -> break
	od;
	x = 0
}

/* verbs_srv_regrant: the grant queue's sessions in order get min(share -
 * promised, free_credits), owed until sent; one the free credits could not
 * fill stays first; one no longer LIVE or below the share leaves. */
inline regrant()
{
	do
	:: nempty(gq) && CAN_GRANT ->
		gq?<y>;
		if
		:: sstate[y] != LIVE || promised[y] >= SHARE ->
			gq?y;
			gqueued[y] = 0
		:: else ->
			g = GRANT(SHARE - promised[y]);
			promised[y] = promised[y] + g;
			owed[y] = owed[y] + g;
			free_credits = free_credits - g;
			printf("server: regrant %d to session %d, owed %d, free %d\n", g, y,
			       owed[y], free_credits);
			if
			:: promised[y] >= SHARE -> gq?y; gqueued[y] = 0
			:: else -> skip	/* the free credits ran out: first next time */
			fi
		fi
	:: else -> break
	od;
	y = 0;
	g = 0
}

/* Credit messages (SEND_OWED). */
inline send_credits()
{
	y = 0;
	do
	:: y < NC ->
		if
		:: sstate[y] == LIVE && owed[y] > 0 && SEND_OWED(y) ->
			send_down(y, D_CREDIT, owed[y]);
			owed[y] = 0
		:: else -> skip
		fi;
		y++
	:: else -> break
	od;
	y = 0
}

/* pool_grant + session_accept: the first grant travels in the reply. */
inline accept(c)
{
	creq[c] = 0;
	sstate[c] = LIVE;
	nlive++;
#ifdef OLD_FIXED_CREDITS
	g = OLD_C;
#else
	g = GRANT(SHARE);
#endif
	free_credits = free_credits - g;
	promised[c] = g;
	printf("server: accept session %d, share %d, grant %d, free %d\n", c, SHARE, g,
	       free_credits);
	send_down(c, D_REPLY, g);
	g = 0;
	gq_push(c);
	check()
}

/* session_destroy: after the drain the QP has nothing in the CQ and
 * consumes nothing, so its unused credits are posted slots. */
inline destroy(c)
{
	cq_purge(c);
	if
	:: recv_slot[c] != NONE ->
		slot[recv_slot[c]] = LOST;
		busy--;
		lost++;
		recv_slot[c] = NONE
	:: else -> skip
	fi;
	printf("server: destroy QP %d, %d credits back, %d slots lost\n", c, promised[c], lost);
	assert(lost == 0);	/* P2: no lost slot */
	do
	:: wire[c]?ckind -> inflight[c]--
	:: empty(wire[c]) -> break
	od;
	free_credits = free_credits + promised[c];
	promised[c] = 0;
	owed[c] = 0;
	applied[c] = 0;
	qp_err[c] = 0;
	sstate[c] = NOSESS;
	gq_push_all();
	regrant();
	send_credits();
	check()
}

/* session_fail: the server learned that the client is gone (control
 * connection closed, CM disconnect, or an error completion). */
inline learn(c)
{
	nlive--;
	printf("server: session %d is gone\n", c);
	gq_push_all();
	qp_to_error(c);
#if defined(DESTROY_BEFORE_DRAIN)
	destroy(c)
#elif defined(SKIP_LAST_WQE)
	sstate[c] = DRAIN
#else
	sstate[c] = WAIT_LAST_WQE
#endif
}

/* pool_complete and the message handler: one receive completion. */
inline poll_one()
{
	cq_pop();
	assert(sstate[cs] != NOSESS);
#ifdef GRANT_BEFORE_REPOST
	unposted = cslot;	/* re-posted by the server's next step */
#else
	repost(cslot);
#endif
	assert(promised[cs] > 0);
	promised[cs]--;
	free_credits++;
#ifndef NO_REQUEUE
	gq_push(cs);
#endif
	if
	:: ckind == K_PUSH -> printf("server: PUSH of session %d in slot %d\n", cs, cslot)
	:: ckind == K_FLUSH -> printf("server: FLUSH of session %d in slot %d\n", cs, cslot)
	:: ckind == K_ERR -> printf("server: error completion of session %d, slot %d\n", cs, cslot)
	fi;
	ack = 0;
	if
	:: ckind == K_PUSH -> applied[cs]++
	:: ckind == K_FLUSH -> ack = 1	/* earlier messages of this QP were handled */
	:: ckind == K_ERR ->
		if
		:: sstate[cs] == LIVE -> learn(cs)
		:: else -> skip
		fi
	fi;
	regrant();
	if
	:: ack -> send_down(cs, D_ACK, owed[cs]); owed[cs] = 0
	:: else -> skip
	fi;
	send_credits();
	ack = 0;
	cs = 0;
	cslot = 0;
	ckind = 0;
	check()
}

#define SERVER_SESSION(c) \
	:: atomic { creq[c] && sstate[c] == NOSESS -> accept(c) } \
	:: atomic { sstate[c] == LIVE && GONE(c) -> learn(c); check() } \
	:: atomic { sstate[c] == WAIT_LAST_WQE && recv_slot[c] == NONE -> sstate[c] = DRAIN; \
		printf("server: LAST_WQE_REACHED on QP %d\n", c) } \
	:: atomic { sstate[c] == DRAIN && cq_of[c] == 0 -> destroy(c) }

#ifdef GRANT_BEFORE_REPOST
#define REPOSTED (unposted == NONE)
#else
#define REPOSTED true
#endif
#define QUIESCENT (GONE(0) && GONE(1) && GONE(2) && \
		   sstate[0] == NOSESS && sstate[1] == NOSESS && sstate[2] == NOSESS && \
		   !creq[0] && !creq[1] && !creq[2] && cq_len == 0 && REPOSTED)

proctype server()
{
	do
	SERVER_SESSION(0)
	SERVER_SESSION(1)
	SERVER_SESSION(2)
#ifdef GRANT_BEFORE_REPOST
	:: atomic { cq_len > 0 && unposted == NONE -> poll_one() }
	:: atomic { unposted != NONE -> repost(unposted); unposted = NONE; check() }
#else
	:: atomic { cq_len > 0 -> poll_one() }
#endif
	:: atomic { QUIESCENT ->
		assert(lost == 0 && posted == S && busy == 0 && free_credits == S);	/* P2 */
		break }
	od
}

/* The NIC: deliveries in order per QP, the ERROR transition of a QP whose
 * peer vanished, the error completion of a message cut short. */
#define NIC_QP(c) \
	:: atomic { nempty(wire[c]) && !qp_err[c] -> \
		wire[c]?ckind; inflight[c]--; take_slot(); cq_push(c, cslot, ckind); \
		printf("nic: QP %d message into slot %d, %d posted\n", c, cslot, posted); \
		cslot = 0; ckind = 0; check() } \
	:: atomic { GONE(c) && sstate[c] != NOSESS && !qp_err[c] -> qp_to_error(c); check() } \
	:: atomic { qp_err[c] && recv_slot[c] != NONE -> \
		cq_push(c, recv_slot[c], K_ERR); \
		printf("nic: QP %d error completion, slot %d\n", c, recv_slot[c]); \
		recv_slot[c] = NONE; check() }

proctype nic()
{
end:
	do
	NIC_QP(0)
	NIC_QP(1)
	NIC_QP(2)
	od
}

/* A replacement counts once the client it replaces died. */
#define BARRIER_OPEN ((finished[0] || dead[0]) && (finished[1] || dead[1]) && \
		      (finished[2] || dead[2] || mortal == NONE || !dead[mortal]))

/* A client: connect, then ROUNDS x (PUSHES pushes, a flush), then
 * disconnect (after the barrier with BARRIER); the mortal one may instead
 * die at any point. */
proctype client(byte c)
{
	byte pc;		/* next operation */
	byte sent;		/* pushes sent */
	byte mark;		/* pushes sent before the outstanding flush */
	bool flushing;		/* flush() is waiting for its ack */
	byte kind, n;

#ifdef REPLACE
	if
	:: c != 2 -> skip
	:: c == 2 && dead[mortal] -> skip
	:: c == 2 && closed[mortal] ->	/* nothing to replace */
		atomic { finished[c] = 1; closed[c] = 1; goto out }
	fi;
#endif
	creq[c] = 1;
	do
	:: atomic { c == mortal ->
		dead[c] = 1;
		printf("client %d dies\n", c);
		credits[c] = 0;
		transit[c] = 0;
		do
		:: down[c]?kind,n
		:: empty(down[c]) -> break
		od;
		pc = 0; sent = 0; mark = 0; flushing = 0; kind = 0; n = 0;
		check();
		break }
	:: atomic { down[c]?kind,n ->
		transit[c] = transit[c] - n;
		credits[c] = credits[c] + n;
		printf("client %d: +%d credits, holds %d\n", c, n, credits[c]);
		if
		:: kind == D_ACK ->
			assert(flushing);
			assert(applied[c] >= mark);	/* P3 */
			flushing = 0;
			mark = 0
		:: else -> skip
		fi;
		kind = 0;
		n = 0;
		check() }
	:: atomic { !flushing && pc < NOPS && credits[c] > 0 ->
		credits[c]--;
		inflight[c]++;
		assert(nfull(wire[c]));
		if
		:: pc % (PUSHES + 1) == PUSHES ->
			wire[c]!K_FLUSH;
			flushing = 1;
			mark = sent;
			printf("client %d: FLUSH, holds %d\n", c, credits[c])
		:: else ->
			wire[c]!K_PUSH;
			sent++;
			printf("client %d: PUSH, holds %d\n", c, credits[c])
		fi;
		pc++;
		check() }
#ifdef BARRIER
	:: atomic { !flushing && pc == NOPS && !finished[c] -> finished[c] = 1;
		printf("client %d: at the barrier, holds %d\n", c, credits[c]) }
	:: atomic { finished[c] && BARRIER_OPEN ->
#else
	:: atomic { !flushing && pc == NOPS ->
#endif
		closed[c] = 1;
		printf("client %d: done, disconnects\n", c);
		credits[c] = 0;
		transit[c] = 0;
		do
		:: down[c]?kind,n
		:: empty(down[c]) -> break
		od;
		pc = 0; sent = 0; kind = 0; n = 0;
		check();
		break }
	od;
out:	skip
}

init
{
	atomic {
#if MORTAL
		if
		:: mortal = NONE
		:: mortal = 0
		:: mortal = 1
		:: NCLIENTS > 2 -> mortal = 2
		fi;
#endif
		run server();
		run nic();
		run client(0);
		run client(1);
#if NCLIENTS > 2
		run client(2)
#elif defined(REPLACE)
		if
		:: mortal != NONE -> run client(2)
		:: else -> finished[2] = 1; closed[2] = 1
		fi
#else
		finished[2] = 1;
		closed[2] = 1
#endif
	}
}
