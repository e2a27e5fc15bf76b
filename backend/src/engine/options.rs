//! Socket options as the guest protocol carries them (a name and a 64-bit value) and as the
//! socket server's one set of rules takes them (`slimtcp::server::options`).

use slimtcp::api::{SockOpt as Opt, SockOptName as Name};
use slimtcp_abi::{Errno, SockOpt};

/// The option `option` set to `value`; a value its type cannot hold: `EINVAL`.
pub(super) fn to_server(option: SockOpt, value: u64) -> Result<Opt, Errno> {
    let size = || usize::try_from(value).map_err(|_| Errno::EINVAL);
    let int = || u32::try_from(value).map_err(|_| Errno::EINVAL);
    let flag = || match value {
        0 | 1 => Ok(value == 1),
        _ => Err(Errno::EINVAL),
    };
    Ok(match option {
        SockOpt::RcvBuf => Opt::RecvBuffer(size()?),
        SockOpt::SndBuf => Opt::SendBuffer(size()?),
        SockOpt::MaxSeg => Opt::Mss(u16::try_from(value).map_err(|_| Errno::EINVAL)?),
        SockOpt::WindowScale => Opt::WindowScale(Some(u8::try_from(value).map_err(|_| Errno::EINVAL)?)),
        SockOpt::NoDelay => Opt::NoDelay(flag()?),
        SockOpt::Burst => Opt::Burst(size()?),
        SockOpt::KeepAlive => Opt::KeepAlive(flag()?),
        SockOpt::KeepIdle => Opt::KeepIdle(int()?),
        SockOpt::KeepInterval => Opt::KeepInterval(int()?),
        SockOpt::KeepCount => Opt::KeepCount(int()?),
        SockOpt::UserTimeout => Opt::UserTimeout(int()?),
    })
}

/// The server's name of `option`.
pub(super) fn name_of(option: SockOpt) -> Name {
    match option {
        SockOpt::RcvBuf => Name::RecvBuffer,
        SockOpt::SndBuf => Name::SendBuffer,
        SockOpt::MaxSeg => Name::Mss,
        SockOpt::WindowScale => Name::WindowScale,
        SockOpt::NoDelay => Name::NoDelay,
        SockOpt::Burst => Name::Burst,
        SockOpt::KeepAlive => Name::KeepAlive,
        SockOpt::KeepIdle => Name::KeepIdle,
        SockOpt::KeepInterval => Name::KeepInterval,
        SockOpt::KeepCount => Name::KeepCount,
        SockOpt::UserTimeout => Name::UserTimeout,
    }
}

/// An option's value as the protocol carries it (no window scale: 0).
pub(super) fn value_of(opt: Opt) -> u64 {
    match opt {
        Opt::RecvBuffer(n) | Opt::SendBuffer(n) | Opt::Burst(n) => n as u64,
        Opt::Mss(m) => u64::from(m),
        Opt::WindowScale(w) => u64::from(w.unwrap_or(0)),
        Opt::NoDelay(on) | Opt::KeepAlive(on) | Opt::NonBlocking(on) => u64::from(on),
        Opt::KeepIdle(v) | Opt::KeepInterval(v) | Opt::KeepCount(v) | Opt::UserTimeout(v) => u64::from(v),
        Opt::Error(e) => e.map_or(0, |e| e.errno() as u64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_protocol_option_round_trips_through_the_servers_names() {
        for (option, value) in [
            (SockOpt::RcvBuf, 65536),
            (SockOpt::SndBuf, 4096),
            (SockOpt::MaxSeg, 1460),
            (SockOpt::WindowScale, 7),
            (SockOpt::NoDelay, 1),
            (SockOpt::Burst, 32),
            (SockOpt::KeepAlive, 1),
            (SockOpt::KeepIdle, 60),
            (SockOpt::KeepInterval, 5),
            (SockOpt::KeepCount, 3),
            (SockOpt::UserTimeout, 1500),
        ] {
            let opt = to_server(option, value).expect("representable");
            assert_eq!(value_of(opt), value, "{option:?}");
        }
    }

    #[test]
    fn values_the_type_cannot_hold_are_einval() {
        assert_eq!(to_server(SockOpt::MaxSeg, 70_000), Err(Errno::EINVAL));
        assert_eq!(to_server(SockOpt::WindowScale, 256), Err(Errno::EINVAL));
        assert_eq!(to_server(SockOpt::NoDelay, 2), Err(Errno::EINVAL));
        assert_eq!(to_server(SockOpt::KeepIdle, u64::from(u32::MAX) + 1), Err(Errno::EINVAL));
    }
}
