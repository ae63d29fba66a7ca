//! A door between AMQP clients (the dispatcher, the workers) and RabbitMQ that reads the
//! frames going through it, to make the broker's messages arrive twice and to partition a
//! client from the broker one way or both, without a reset.
//!
//! Why frames and not bytes: to publish a message twice, the door repeats a client's
//! `basic.publish` (its method, header and body frames) and hides the broker's extra
//! confirm (`basic.ack`/`basic.nack` of the copy) by renumbering the confirms the client
//! sees, so the client's publisher confirms stay correct. A partition holds a direction's
//! frames (never drops them: TCP would retransmit them); the peers notice through their
//! heartbeats.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Which frames a partition holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Client to server: the server hears nothing from the client.
    Up,
    /// Server to client: the client hears nothing from the server.
    Down,
    /// Both ways.
    Both,
}

#[derive(Default)]
struct Flags {
    up: AtomicBool,
    down: AtomicBool,
    twice: AtomicBool,
    duplicated: AtomicUsize,
}

/// Per channel of a connection: in confirm mode, the broker's confirm numbers in order,
/// each the client's own (`Some`) or a copy's (`None`).
type Confirms = Arc<Mutex<HashMap<u16, Vec<Option<u64>>>>>;

/// The running door (its threads serve until the test process ends).
pub struct AmqpDoor {
    /// The port the clients connect to (on 127.0.0.1).
    pub port: u16,
    flags: Arc<Flags>,
}

impl AmqpDoor {
    /// Starts a door in front of the broker at `upstream` (`HOST:PORT`).
    pub fn start(upstream: &str) -> AmqpDoor {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the AMQP door");
        let port = listener.local_addr().expect("door address").port();
        let flags = Arc::new(Flags::default());
        let (shared, upstream) = (flags.clone(), upstream.to_string());
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(server) = TcpStream::connect(&upstream) else {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                };
                if let (Ok(c2), Ok(s2)) = (client.try_clone(), server.try_clone()) {
                    let confirms = Confirms::default();
                    let (f1, f2, k2) = (shared.clone(), shared.clone(), confirms.clone());
                    std::thread::spawn(move || upward(client, server, &f1, &confirms));
                    std::thread::spawn(move || downward(s2, c2, &f2, &k2));
                }
            }
        });
        AmqpDoor { port, flags }
    }

    /// The URI of `uri` (`amqp://user:pass@HOST:PORT/vhost`) through this door.
    pub fn uri(&self, uri: &str, broker: &str) -> String {
        uri.replace(broker, &format!("127.0.0.1:{}", self.port))
    }

    /// Holds the frames of `direction` from now until [`AmqpDoor::heal`].
    pub fn partition(&self, direction: Direction) {
        let (up, down) = match direction {
            Direction::Up => (true, false),
            Direction::Down => (false, true),
            Direction::Both => (true, true),
        };
        self.flags.up.store(up, Ordering::SeqCst);
        self.flags.down.store(down, Ordering::SeqCst);
    }

    /// Lets the held frames and everything after them through.
    pub fn heal(&self) {
        self.flags.up.store(false, Ordering::SeqCst);
        self.flags.down.store(false, Ordering::SeqCst);
    }

    /// Publishes every message twice while `on`.
    pub fn twice(&self, on: bool) {
        self.flags.twice.store(on, Ordering::SeqCst);
    }

    /// Messages published twice so far.
    pub fn duplicated(&self) -> usize {
        self.flags.duplicated.load(Ordering::SeqCst)
    }
}

/// One frame: type, channel, payload.
struct Frame {
    kind: u8,
    channel: u16,
    payload: Vec<u8>,
}

impl Frame {
    fn read(from: &mut TcpStream) -> Option<Frame> {
        let mut head = [0u8; 7];
        from.read_exact(&mut head).ok()?;
        let size = u32::from_be_bytes([head[3], head[4], head[5], head[6]]) as usize;
        let mut payload = vec![0u8; size + 1];
        from.read_exact(&mut payload).ok()?;
        payload.pop(); // the frame end (0xCE)
        let channel = u16::from_be_bytes([head[1], head[2]]);
        Some(Frame {
            kind: head[0],
            channel,
            payload,
        })
    }

    fn bytes(&self) -> Vec<u8> {
        let mut out = vec![self.kind];
        out.extend_from_slice(&self.channel.to_be_bytes());
        out.extend_from_slice(&(self.payload.len() as u32).to_be_bytes());
        out.extend_from_slice(&self.payload);
        out.push(0xCE);
        out
    }

    /// (class, method) of a method frame.
    fn method(&self) -> Option<(u16, u16)> {
        (self.kind == 1 && self.payload.len() >= 4).then(|| {
            let p = &self.payload;
            (
                u16::from_be_bytes([p[0], p[1]]),
                u16::from_be_bytes([p[2], p[3]]),
            )
        })
    }
}

fn wait_while(held: &AtomicBool) {
    while held.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A publish being read: its frames so far and the body bytes still to come.
struct Publish {
    frames: Vec<u8>,
    body_left: Option<u64>,
}

/// Client to broker: frames passed on (held while partitioned), each publish repeated
/// while `twice` is on, the confirm numbers recorded for [`downward`].
fn upward(mut client: TcpStream, mut server: TcpStream, flags: &Flags, confirms: &Confirms) {
    let mut header = [0u8; 8];
    if client.read_exact(&mut header).is_err() || server.write_all(&header).is_err() {
        return;
    }
    let mut publishing: HashMap<u16, Publish> = HashMap::new();
    let mut sent: HashMap<u16, u64> = HashMap::new();
    while let Some(frame) = Frame::read(&mut client) {
        wait_while(&flags.up);
        let ch = frame.channel;
        match frame.method() {
            Some((20, 10)) => {
                confirms.lock().expect("confirms").remove(&ch);
                sent.remove(&ch);
            }
            Some((85, 10)) => {
                confirms.lock().expect("confirms").insert(ch, Vec::new());
            }
            Some((60, 40)) => {
                let p = Publish {
                    frames: frame.bytes(),
                    body_left: None,
                };
                publishing.insert(ch, p);
                continue;
            }
            _ => {}
        }
        let Some(publish) = publishing.get_mut(&ch) else {
            if server.write_all(&frame.bytes()).is_err() {
                break;
            }
            continue;
        };
        publish.frames.extend_from_slice(&frame.bytes());
        let left = match (frame.kind, publish.body_left) {
            (2, _) if frame.payload.len() >= 12 => {
                u64::from_be_bytes(frame.payload[4..12].try_into().expect("8 bytes"))
            }
            (3, Some(left)) => left.saturating_sub(frame.payload.len() as u64),
            _ => publish.body_left.unwrap_or(0),
        };
        publish.body_left = Some(left);
        if left > 0 {
            continue;
        }
        let publish = publishing.remove(&ch).expect("publish");
        let twice = flags.twice.load(Ordering::SeqCst);
        let n = sent.entry(ch).or_default();
        *n += 1;
        if let Some(order) = confirms.lock().expect("confirms").get_mut(&ch) {
            order.push(Some(*n));
            if twice {
                order.push(None);
            }
        }
        if twice {
            flags.duplicated.fetch_add(1, Ordering::SeqCst);
        }
        let copies = if twice { 2 } else { 1 };
        if (0..copies).any(|_| server.write_all(&publish.frames).is_err()) {
            break;
        }
    }
    let _ = server.shutdown(Shutdown::Write);
}

/// Broker to client: frames passed on (held while partitioned), confirms renumbered to the
/// client's publishes and those of the copies left out.
fn downward(mut server: TcpStream, mut client: TcpStream, flags: &Flags, confirms: &Confirms) {
    while let Some(mut frame) = Frame::read(&mut server) {
        wait_while(&flags.down);
        if let Some((60, 80 | 120)) = frame.method() {
            if frame.payload.len() < 13 {
                break;
            }
            let tag = u64::from_be_bytes(frame.payload[4..12].try_into().expect("8 bytes"));
            let multiple = frame.payload[12] & 1 == 1;
            let confirms = confirms.lock().expect("confirms");
            let order = confirms
                .get(&frame.channel)
                .map(Vec::as_slice)
                .unwrap_or(&[]);
            let upto = order.get(..tag as usize).unwrap_or(order);
            let own = if multiple {
                upto.iter().rev().find_map(|c| *c)
            } else {
                upto.last().copied().flatten()
            };
            let Some(own) = own else {
                continue; // the confirm of a copy: the client never published it
            };
            frame.payload[4..12].copy_from_slice(&own.to_be_bytes());
        }
        if client.write_all(&frame.bytes()).is_err() {
            break;
        }
    }
    let _ = client.shutdown(Shutdown::Write);
}
