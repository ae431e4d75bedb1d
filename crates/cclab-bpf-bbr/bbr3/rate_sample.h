// SPDX-License-Identifier: MIT
/* bbr3.bpf.c's rate_sample.h: The port's own piece: v3's rate-sample fields that mainline lacks, rebuilt per ACK. */
#pragma once

/* --- The port's rebuilt rate-sample fields -------------------------------- */
/* tp->lost when the packet that tp->delivered == `delivered` was sent: the
 * value after the last ACK that had delivered no more than that. v3 stores it
 * per skb (scb->tx.lost). */
static __always_inline __u32 lost_at_send(const struct bbr3 *bbr, __u32 delivered)
{
	__u32 lost = bbr->last_lost; /* tp->lost after the previous ACK */

	for (int i = 1; i <= LOSS_HISTORY; i++) {
		__u32 idx = (bbr->hist_next - i) & (LOSS_HISTORY - 1);

		if (bbr->hist_next < (__u32)i)
			break;
		if (!after(bbr->hist_delivered[idx], delivered))
			return bbr->hist_lost_after[idx];
		lost = bbr->hist_lost_before[idx];
	}
	return lost;
}

static __always_inline void note_lost_change(struct bbr3 *bbr, __u32 delivered, __u32 lost)
{
	__u32 idx = bbr->hist_next & (LOSS_HISTORY - 1);

	bbr->hist_delivered[idx] = delivered;
	bbr->hist_lost_before[idx] = bbr->last_lost;
	bbr->hist_lost_after[idx] = lost;
	bbr->hist_next++;
	bbr->last_lost = lost;
}

/* v3's rs->lost (tp->lost - scb->tx.lost) and rs->tx_in_flight (packets in
 * flight when the sampled skb left, itself included): every packet in flight
 * then has since been delivered (rs->delivered counts them, the skb too) or
 * marked lost (rs->lost), or is still unresolved (not counted). */
static __always_inline void rebuild_sample(struct sock *sk, const struct bbr3 *bbr,
					   const struct rate_sample *rs, struct v3_sample *v3)
{
	struct tcp_sock *tp = tcp_sk(sk);
	__s32 lost = 0;

	v3->tx_in_flight = 0;
	v3->lost = 0;
	v3->is_app_limited = rs->is_app_limited;
	if (rs->delivered < 0 || !rs->prior_mstamp)
		return;
	lost = (__s32)(tp->lost - lost_at_send(bbr, rs->prior_delivered));
	v3->lost = lost > 0 ? lost : 0;
	v3->tx_in_flight = (__u32)rs->delivered + (__u32)v3->lost;
}
