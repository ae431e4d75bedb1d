//! A minimal nfnetlink_queue client spoken directly over a netlink socket.
//!
//! Message layouts follow include/uapi/linux/netfilter/nfnetlink_queue.h and
//! include/uapi/linux/netfilter/nfnetlink.h; the kernel side is
//! net/netfilter/nfnetlink_queue.c (nfqnl_recv_config, nfqnl_recv_verdict_batch).

use std::io;
use std::mem::size_of;

/// NETLINK_NETFILTER protocol number (include/uapi/linux/netlink.h).
const NETLINK_NETFILTER: i32 = 12;
/// NFNL_SUBSYS_QUEUE (include/uapi/linux/netfilter/nfnetlink.h).
const NFNL_SUBSYS_QUEUE: u16 = 3;
/// enum nfqnl_msg_types.
const NFQNL_MSG_PACKET: u16 = 0;
const NFQNL_MSG_VERDICT: u16 = 1;
const NFQNL_MSG_CONFIG: u16 = 2;
const NFQNL_MSG_VERDICT_BATCH: u16 = 3;
/// enum nfqnl_attr_config.
const NFQA_CFG_CMD: u16 = 1;
const NFQA_CFG_PARAMS: u16 = 2;
const NFQA_CFG_QUEUE_MAXLEN: u16 = 3;
/// enum nfqnl_msg_config_cmds.
const NFQNL_CFG_CMD_BIND: u8 = 1;
/// enum nfqnl_config_mode: packet metadata only, or metadata and the packet's bytes.
const NFQNL_COPY_META: u8 = 1;
const NFQNL_COPY_PACKET: u8 = 2;
/// enum nfqnl_attr_type.
const NFQA_PACKET_HDR: u16 = 1;
const NFQA_VERDICT_HDR: u16 = 2;
const NFQA_TIMESTAMP: u16 = 4;
const NFQA_PAYLOAD: u16 = 10;
/// NF_DROP, NF_ACCEPT (include/uapi/linux/netfilter.h).
pub const NF_DROP: u32 = 0;
pub const NF_ACCEPT: u32 = 1;
/// NFNETLINK_V0.
const NFNETLINK_V0: u8 = 0;
/// Netlink attribute type mask (NLA_TYPE_MASK drops the nested/byteorder flags).
const NLA_TYPE_MASK: u16 = 0x3fff;

const NLMSG_HDR_BYTES: usize = 16;
const NFGEN_HDR_BYTES: usize = 4;

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// One packet announced by the kernel.
#[derive(Clone, Debug)]
pub struct QueuedPacket {
    pub queue: u16,
    pub id: u32,
    /// Kernel receive timestamp (CLOCK_REALTIME, ns; microsecond resolution), if the skb had one.
    pub rx_realtime_ns: Option<i64>,
    /// The packet from its IP header on (queues bound with `CopyMode::Packet` only).
    pub payload: Option<Vec<u8>>,
}

/// What the kernel copies to user space for each packet of a queue.
#[derive(Clone, Copy, Debug)]
pub enum CopyMode {
    /// Metadata only (the delay line needs no bytes).
    Meta,
    /// Metadata and up to this many bytes of the packet.
    Packet(u32),
}

pub struct NfQueueSocket {
    fd: i32,
    seq: u32,
    buf: Vec<u8>,
    /// Netlink errors the kernel reported for our requests (e.g. a verdict for an unknown id).
    pub netlink_errors: u64,
}

fn cvt(ret: i32) -> io::Result<i32> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn setsockopt_i32(fd: i32, level: i32, name: i32, value: i32) -> io::Result<()> {
    let v = value;
    let ret = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            &v as *const i32 as *const libc::c_void,
            size_of::<i32>() as libc::socklen_t,
        )
    };
    cvt(ret).map(|_| ())
}

impl NfQueueSocket {
    /// Opens the netlink socket with a receive buffer of `rcvbuf_bytes`, forced past
    /// net.core.rmem_max (read-only in child namespaces) with SO_RCVBUFFORCE.
    pub fn open(rcvbuf_bytes: i32) -> io::Result<Self> {
        let fd = cvt(unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                NETLINK_NETFILTER,
            )
        })?;
        let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        addr.nl_family = libc::AF_NETLINK as u16;
        cvt(unsafe {
            libc::bind(
                fd,
                &addr as *const libc::sockaddr_nl as *const libc::sockaddr,
                size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        })?;
        setsockopt_i32(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, rcvbuf_bytes)?;
        // Overruns must not abort reads with ENOBUFS; the kernel counts them in
        // /proc/net/netfilter/nfnetlink_queue (queue_dropped/user_dropped) instead.
        setsockopt_i32(fd, libc::SOL_NETLINK, libc::NETLINK_NO_ENOBUFS, 1)?;
        Ok(NfQueueSocket { fd, seq: 1, buf: vec![0u8; 1 << 20], netlink_errors: 0 })
    }

    pub fn fd(&self) -> i32 {
        self.fd
    }

    fn header(&mut self, out: &mut Vec<u8>, msg: u16, flags: u16, queue: u16) {
        let seq = self.seq;
        self.seq = self.seq.wrapping_add(1);
        out.extend_from_slice(&0u32.to_ne_bytes()); // length, patched in finish()
        out.extend_from_slice(&((NFNL_SUBSYS_QUEUE << 8) | msg).to_ne_bytes());
        out.extend_from_slice(&(libc::NLM_F_REQUEST as u16 | flags).to_ne_bytes());
        out.extend_from_slice(&seq.to_ne_bytes());
        out.extend_from_slice(&0u32.to_ne_bytes()); // port id: kernel fills in
        out.push(libc::AF_UNSPEC as u8);
        out.push(NFNETLINK_V0);
        out.extend_from_slice(&queue.to_be_bytes());
    }

    fn attr(out: &mut Vec<u8>, kind: u16, payload: &[u8]) {
        let len = 4 + payload.len();
        out.extend_from_slice(&(len as u16).to_ne_bytes());
        out.extend_from_slice(&kind.to_ne_bytes());
        out.extend_from_slice(payload);
        out.resize(align4(out.len()), 0);
    }

    fn finish(out: &mut [u8]) {
        let len = out.len() as u32;
        out[0..4].copy_from_slice(&len.to_ne_bytes());
    }

    fn send(&self, msg: &[u8]) -> io::Result<()> {
        let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        addr.nl_family = libc::AF_NETLINK as u16;
        let ret = unsafe {
            libc::sendto(
                self.fd,
                msg.as_ptr() as *const libc::c_void,
                msg.len(),
                0,
                &addr as *const libc::sockaddr_nl as *const libc::sockaddr,
                size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if ret < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Sends a config request with NLM_F_ACK and waits for the kernel's answer.
    fn config(&mut self, queue: u16, attrs: &[(u16, Vec<u8>)]) -> io::Result<()> {
        let mut msg = Vec::with_capacity(64);
        self.header(&mut msg, NFQNL_MSG_CONFIG, libc::NLM_F_ACK as u16, queue);
        for (kind, payload) in attrs {
            Self::attr(&mut msg, *kind, payload);
        }
        Self::finish(&mut msg);
        self.send(&msg)?;
        let n = cvt(unsafe {
            libc::recv(self.fd, self.buf.as_mut_ptr() as *mut libc::c_void, self.buf.len(), 0)
                as i32
        })? as usize;
        if n >= NLMSG_HDR_BYTES + 4 {
            let kind = u16::from_ne_bytes([self.buf[4], self.buf[5]]);
            if kind == libc::NLMSG_ERROR as u16 {
                let errno = i32::from_ne_bytes(self.buf[16..20].try_into().unwrap());
                if errno != 0 {
                    return Err(io::Error::from_raw_os_error(-errno));
                }
            }
        }
        Ok(())
    }

    /// Binds queue `queue` with copy mode `copy` and a kernel-side queue of `maxlen` packets.
    /// No NFQA_CFG_F_FAIL_OPEN: if this program dies, queued packets are dropped (fail closed).
    pub fn bind_queue(&mut self, queue: u16, maxlen: u32, copy: CopyMode) -> io::Result<()> {
        let cmd = vec![NFQNL_CFG_CMD_BIND, 0, 0, libc::AF_INET as u8];
        self.config(queue, &[(NFQA_CFG_CMD, cmd)])?;
        let (range, mode) = match copy {
            CopyMode::Meta => (0u32, NFQNL_COPY_META),
            CopyMode::Packet(range) => (range, NFQNL_COPY_PACKET),
        };
        let mut params = range.to_be_bytes().to_vec();
        params.push(mode); // struct nfqnl_msg_config_params is packed: 5 bytes
        self.config(
            queue,
            &[(NFQA_CFG_PARAMS, params), (NFQA_CFG_QUEUE_MAXLEN, maxlen.to_be_bytes().to_vec())],
        )
    }

    /// Accepts every packet of `queue` whose id is <= `max_id` with one batch verdict.
    pub fn accept_up_to(&mut self, queue: u16, max_id: u32) -> io::Result<()> {
        let mut msg = Vec::with_capacity(32);
        self.header(&mut msg, NFQNL_MSG_VERDICT_BATCH, 0, queue);
        let mut verdict = NF_ACCEPT.to_be_bytes().to_vec();
        verdict.extend_from_slice(&max_id.to_be_bytes());
        Self::attr(&mut msg, NFQA_VERDICT_HDR, &verdict);
        Self::finish(&mut msg);
        self.send(&msg)
    }

    /// Appends a single-packet verdict (NFQNL_MSG_VERDICT) to `batch`. With `payload`, the
    /// kernel replaces the packet's bytes by it (nfqnl_mangle): it must be the whole packet,
    /// since a shorter payload trims the skb.
    pub fn push_verdict(&mut self, batch: &mut Vec<u8>, queue: u16, id: u32, verdict: u32, payload: Option<&[u8]>) {
        let start = batch.len();
        self.header(batch, NFQNL_MSG_VERDICT, 0, queue);
        let mut hdr = verdict.to_be_bytes().to_vec();
        hdr.extend_from_slice(&id.to_be_bytes());
        Self::attr(batch, NFQA_VERDICT_HDR, &hdr);
        if let Some(p) = payload {
            Self::attr(batch, NFQA_PAYLOAD, p);
        }
        Self::finish(&mut batch[start..]);
    }

    /// Sends the verdicts collected by `push_verdict` in one datagram (netlink_rcv_skb
    /// handles every message in it) and empties `batch`.
    pub fn send_verdicts(&mut self, batch: &mut Vec<u8>) -> io::Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let r = self.send(batch);
        batch.clear();
        r
    }

    /// Reads every pending datagram without blocking and appends announced packets to `out`.
    pub fn drain(&mut self, out: &mut Vec<QueuedPacket>) -> io::Result<()> {
        loop {
            let n = unsafe {
                libc::recv(
                    self.fd,
                    self.buf.as_mut_ptr() as *mut libc::c_void,
                    self.buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if n < 0 {
                let err = io::Error::last_os_error();
                return match err.raw_os_error() {
                    Some(libc::EAGAIN) => Ok(()),
                    Some(libc::EINTR) => Ok(()),
                    Some(libc::ENOBUFS) => Ok(()),
                    _ => Err(err),
                };
            }
            self.parse(n as usize, out);
        }
    }

    fn parse(&mut self, n: usize, out: &mut Vec<QueuedPacket>) {
        let mut off = 0;
        while off + NLMSG_HDR_BYTES <= n {
            let b = &self.buf;
            let len = u32::from_ne_bytes(b[off..off + 4].try_into().unwrap()) as usize;
            if len < NLMSG_HDR_BYTES || off + len > n {
                break;
            }
            let kind = u16::from_ne_bytes([b[off + 4], b[off + 5]]);
            if kind == libc::NLMSG_ERROR as u16 {
                let errno = i32::from_ne_bytes(b[off + 16..off + 20].try_into().unwrap());
                if errno != 0 {
                    self.netlink_errors += 1;
                }
            } else if kind == ((NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET) {
                if let Some(p) = parse_packet(&b[off..off + len]) {
                    out.push(p);
                }
            }
            off += align4(len);
        }
    }
}

fn parse_packet(msg: &[u8]) -> Option<QueuedPacket> {
    let nfgen = &msg[NLMSG_HDR_BYTES..NLMSG_HDR_BYTES + NFGEN_HDR_BYTES];
    let queue = u16::from_be_bytes([nfgen[2], nfgen[3]]);
    let mut off = NLMSG_HDR_BYTES + NFGEN_HDR_BYTES;
    let mut id = None;
    let mut ts = None;
    let mut payload = None;
    while off + 4 <= msg.len() {
        let alen = u16::from_ne_bytes([msg[off], msg[off + 1]]) as usize;
        let kind = u16::from_ne_bytes([msg[off + 2], msg[off + 3]]) & NLA_TYPE_MASK;
        if alen < 4 || off + alen > msg.len() {
            break;
        }
        let p = &msg[off + 4..off + alen];
        match kind {
            NFQA_PACKET_HDR if p.len() >= 4 => {
                id = Some(u32::from_be_bytes(p[0..4].try_into().unwrap()));
            }
            NFQA_TIMESTAMP if p.len() >= 16 => {
                // struct nfqnl_msg_packet_timestamp { __aligned_be64 sec, usec; }
                let sec = u64::from_be_bytes(p[0..8].try_into().unwrap()) as i64;
                let usec = u64::from_be_bytes(p[8..16].try_into().unwrap()) as i64;
                ts = Some(sec * 1_000_000_000 + usec * 1_000);
            }
            NFQA_PAYLOAD => payload = Some(p.to_vec()),
            _ => {}
        }
        off += align4(alen);
    }
    id.map(|id| QueuedPacket { queue, id, rx_realtime_ns: ts, payload })
}

impl Drop for NfQueueSocket {
    fn drop(&mut self) {
        unsafe { libc::close(self.fd) };
    }
}
