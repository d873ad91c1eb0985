//! Z-Lane rates as control requests name them, and their home in the
//! parameters: the `rates` array of a `zlane-classify` stage, one table per
//! origin: `rates = [{ as = "1-ff00:0:110", bps = 100000000 }, { isd = 2,
//! percent_of_g = 10.0 }, { as = "1-10" }]` (no rate = equal share of what
//! the explicit rates leave of μ_G). Gateway host rates live in `host_rates
//! = [{ prefix = "10.0.0.0/24", bps = 1000000 }]` of a `zlane-gateway` stage.

use control::error::CtlError;
use control::text::{bps, parse_ia};
use packet::Ia;

use crate::pb;

/// An AS or ISD whose traffic a Z-Lane rate applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// One AS.
    As(Ia),
    /// A whole ISD.
    Isd(u16),
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::As(ia) => write!(f, "AS {ia}"),
            Origin::Isd(i) => write!(f, "ISD {i}"),
        }
    }
}

/// Validates a protobuf origin.
pub fn origin(o: Option<&pb::Origin>) -> Result<Origin, CtlError> {
    match o.and_then(|o| o.who.as_ref()) {
        None => Err(CtlError::invalid("origin: give `ia` or `isd`")),
        Some(pb::origin::Who::Ia(s)) => Ok(Origin::As(parse_ia("origin.ia", s)?)),
        Some(pb::origin::Who::Isd(i)) => match u16::try_from(*i) {
            Ok(i) if i != 0 => Ok(Origin::Isd(i)),
            _ => Err(CtlError::invalid(format!("origin.isd: {i} is not in 1..=65535"))),
        },
    }
}

impl Origin {
    /// The protobuf form.
    pub fn to_pb(self) -> pb::Origin {
        pb::Origin {
            who: Some(match self {
                Origin::As(ia) => pb::origin::Who::Ia(ia.to_string()),
                Origin::Isd(i) => pb::origin::Who::Isd(u32::from(i)),
            }),
        }
    }

    /// Whether a `rates` entry names this origin.
    fn matches(self, t: &toml::Table) -> bool {
        match self {
            Origin::As(ia) => {
                t.get("as").and_then(|v| v.as_str()).and_then(|s| s.parse::<Ia>().ok()) == Some(ia)
            }
            Origin::Isd(i) => t.get("isd").and_then(|v| v.as_integer()) == Some(i64::from(i)),
        }
    }

    /// Reads the origin of a `rates` entry.
    pub fn of_entry(t: &toml::Table) -> Option<Origin> {
        if let Some(s) = t.get("as").and_then(|v| v.as_str()) {
            return s.parse().ok().map(Origin::As);
        }
        t.get("isd")
            .and_then(|v| v.as_integer())
            .and_then(|i| u16::try_from(i).ok())
            .map(Origin::Isd)
    }
}

/// A rate for an origin.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rate {
    /// bit/s.
    Bps(u64),
    /// Percent of μ_G × capacity.
    PercentOfG(f64),
}

/// Validates a protobuf rate.
pub fn rate(r: Option<&pb::set_rate_request::Rate>) -> Result<Rate, CtlError> {
    match r {
        None => Err(CtlError::invalid("rate: give `bps` or `percent_of_g`")),
        Some(pb::set_rate_request::Rate::Bps(b)) => bps("bps", *b).map(Rate::Bps),
        Some(pb::set_rate_request::Rate::PercentOfG(p)) => {
            if p.is_finite() && *p > 0.0 && *p <= 100.0 {
                Ok(Rate::PercentOfG(*p))
            } else {
                Err(CtlError::invalid(format!("percent_of_g: {p} is not in (0, 100]")))
            }
        }
    }
}

/// Sets (or adds) `origin`'s entry in the `rates` array of `params`.
pub fn upsert_rate(params: &mut toml::Table, origin: Origin, rate: Rate) -> Result<(), CtlError> {
    let mut entry = toml::Table::new();
    match origin {
        Origin::As(ia) => entry.insert("as".into(), ia.to_string().into()),
        Origin::Isd(i) => entry.insert("isd".into(), i64::from(i).into()),
    };
    match rate {
        Rate::Bps(b) => entry.insert("bps".into(), toml::Value::Integer(b as i64)),
        Rate::PercentOfG(p) => entry.insert("percent_of_g".into(), p.into()),
    };
    let rates = rates_mut(params)?;
    match rates.iter_mut().find(|v| v.as_table().is_some_and(|t| origin.matches(t))) {
        Some(v) => *v = toml::Value::Table(entry),
        None => rates.push(toml::Value::Table(entry)),
    }
    Ok(())
}

/// Removes `origin`'s entry; `NOT_FOUND` if there is none.
pub fn remove_rate(params: &mut toml::Table, origin: Origin) -> Result<(), CtlError> {
    let rates = rates_mut(params)?;
    let before = rates.len();
    rates.retain(|v| !v.as_table().is_some_and(|t| origin.matches(t)));
    if rates.len() == before {
        return Err(CtlError::NotFound(format!("{origin} has no configured rate")));
    }
    Ok(())
}

fn rates_mut(params: &mut toml::Table) -> Result<&mut Vec<toml::Value>, CtlError> {
    let v = params.entry("rates").or_insert_with(|| toml::Value::Array(Vec::new()));
    v.as_array_mut().ok_or_else(|| {
        CtlError::FailedPrecondition("stage parameter `rates` is not an array".into())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_and_rates_validate() {
        let o = |w| origin(Some(&pb::Origin { who: Some(w) }));
        assert_eq!(
            o(pb::origin::Who::Ia("1-ff00:0:110".into())).unwrap(),
            Origin::As("1-ff00:0:110".parse().unwrap())
        );
        assert!(o(pb::origin::Who::Ia("1-0".into())).unwrap_err().to_string().contains("wildcard"));
        assert!(o(pb::origin::Who::Ia("x".into()))
            .unwrap_err()
            .to_string()
            .starts_with("origin.ia:"));
        assert!(o(pb::origin::Who::Isd(70000)).is_err());
        assert!(origin(None).is_err());
        assert!(rate(Some(&pb::set_rate_request::Rate::Bps(0))).is_err());
        assert!(rate(Some(&pb::set_rate_request::Rate::PercentOfG(f64::NAN))).is_err());
        assert!(rate(Some(&pb::set_rate_request::Rate::PercentOfG(100.0))).is_ok());
    }

    #[test]
    fn rates_upsert_and_remove() {
        let mut t: toml::Table =
            toml::from_str("rates = [{ as = \"1-10\", bps = 5 }, { isd = 2 }]").unwrap();
        let a = Origin::As("1-10".parse().unwrap());
        upsert_rate(&mut t, a, Rate::Bps(7)).unwrap();
        upsert_rate(&mut t, Origin::Isd(3), Rate::PercentOfG(5.0)).unwrap();
        let r = t["rates"].as_array().unwrap();
        assert_eq!(r.len(), 3);
        assert_eq!(r[0].as_table().unwrap()["bps"].as_integer(), Some(7));
        remove_rate(&mut t, Origin::Isd(2)).unwrap();
        assert_eq!(remove_rate(&mut t, Origin::Isd(2)).unwrap_err().code(), tonic::Code::NotFound);
        assert_eq!(t["rates"].as_array().unwrap().len(), 2);
    }
}
