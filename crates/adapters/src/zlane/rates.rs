//! Z-Lane rates between control requests and parameters: the protobuf
//! forms of `zlane::config::{Origin, Rate, RateConfig}` and their home, the
//! `rates` array of a `zlane-classify` stage, one table per origin: `rates =
//! [{ as = "1-ff00:0:110", bps = 100000000 }, { isd = 2, percent_of_g =
//! 10.0 }, { as = "1-10" }]` (no rate = equal share of what the explicit
//! rates leave of μ_G). Gateway host rates live in `prefixes = [{ prefix =
//! "10.0.0.0/24", bps = 1000000 }]` of a `zlane-gateway` stage.

use control::error::CtlError;
use control::text::{bps, parse_ia};
use zlane::config::{HostPrefix, Origin, PrefixRate, Rate, RateConfig};

use crate::pb;

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

/// The protobuf form of an origin.
pub fn origin_pb(o: Origin) -> pb::Origin {
    pb::Origin {
        who: Some(match o {
            Origin::As(ia) => pb::origin::Who::Ia(ia.to_string()),
            Origin::Isd(i) => pb::origin::Who::Isd(u32::from(i)),
        }),
    }
}

/// A configured rate as `ListRates` reports it, for the stage at pipeline index `stage`.
pub fn entry_pb(r: &RateConfig, stage: usize) -> pb::RateEntry {
    let (bps, percent_of_g) = match r.rate {
        Some(Rate::Bps(b)) => (b, 0.0),
        Some(Rate::PercentOfG(p)) => (0, p),
        None => (0, 0.0),
    };
    pb::RateEntry { origin: Some(origin_pb(r.origin)), bps, percent_of_g, stage: stage as u32 }
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

/// The parameter-table form of a `rates` entry.
fn entry_toml(origin: Origin, rate: Rate) -> toml::Value {
    let mut t = toml::Table::new();
    match origin {
        Origin::As(ia) => t.insert("as".into(), ia.to_string().into()),
        Origin::Isd(i) => t.insert("isd".into(), i64::from(i).into()),
    };
    match rate {
        Rate::Bps(b) => t.insert("bps".into(), saturating_i64(b).into()),
        Rate::PercentOfG(p) => t.insert("percent_of_g".into(), p.into()),
    };
    toml::Value::Table(t)
}

fn saturating_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The origin a `rates` entry names, if it parses.
fn origin_of(v: &toml::Value) -> Option<Origin> {
    let t = v.as_table()?;
    runtime::config::typed::<RateConfig>(t).ok().map(|r| r.origin)
}

/// Sets (or adds) `origin`'s entry in the `rates` array of `params`.
pub fn upsert_rate(params: &mut toml::Table, origin: Origin, rate: Rate) -> Result<(), CtlError> {
    let rates = array_mut(params, "rates")?;
    let entry = entry_toml(origin, rate);
    match rates.iter_mut().find(|v| origin_of(v) == Some(origin)) {
        Some(v) => *v = entry,
        None => rates.push(entry),
    }
    Ok(())
}

/// Removes `origin`'s entry; `NOT_FOUND` if there is none.
pub fn remove_rate(params: &mut toml::Table, origin: Origin) -> Result<(), CtlError> {
    let rates = array_mut(params, "rates")?;
    let before = rates.len();
    rates.retain(|v| origin_of(v) != Some(origin));
    if rates.len() == before {
        return Err(CtlError::NotFound(format!("{origin} has no configured rate")));
    }
    Ok(())
}

/// Sets (or adds) the rate of `prefix` in the `prefixes` array of a
/// `zlane-gateway` stage's `params` (entries naming the same prefix in
/// another spelling are replaced).
pub fn upsert_prefix(params: &mut toml::Table, prefix: &str, rate: u64) -> Result<(), CtlError> {
    let parsed: HostPrefix =
        prefix.parse().map_err(|e: String| CtlError::invalid(format!("prefix: {e}")))?;
    let same = |v: &toml::Value| {
        let t = v.as_table();
        t.and_then(|t| runtime::config::typed::<PrefixRate>(t).ok()).map(|p| p.prefix)
            == Some(parsed)
    };
    let prefixes = array_mut(params, "prefixes")?;
    prefixes.retain(|v| !same(v));
    let mut t = toml::Table::new();
    t.insert("prefix".into(), prefix.into());
    t.insert("bps".into(), saturating_i64(rate).into());
    prefixes.push(toml::Value::Table(t));
    Ok(())
}

fn array_mut<'a>(
    params: &'a mut toml::Table,
    key: &str,
) -> Result<&'a mut Vec<toml::Value>, CtlError> {
    let v = params.entry(key).or_insert_with(|| toml::Value::Array(Vec::new()));
    v.as_array_mut().ok_or_else(|| {
        CtlError::FailedPrecondition(format!("stage parameter `{key}` is not an array"))
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
        let listed: Vec<RateConfig> = t["rates"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| runtime::config::typed(v.as_table().unwrap()).unwrap())
            .collect();
        assert_eq!(entry_pb(&listed[1], 1).percent_of_g, 5.0);
        assert_eq!(entry_pb(&listed[0], 1).bps, 7);
    }

    #[test]
    fn prefixes_upsert_by_prefix() {
        let mut t: toml::Table =
            toml::from_str("prefixes = [{ prefix = \"2001:db8::/32\", bps = 5 }]").unwrap();
        upsert_prefix(&mut t, "2001:0db8:0::/32", 9).unwrap();
        upsert_prefix(&mut t, "10.1.0.0/16", 3).unwrap();
        let p = t["prefixes"].as_array().unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].as_table().unwrap()["bps"].as_integer(), Some(9));
        assert!(upsert_prefix(&mut t, "10.0.0.0", 1).is_err());
        assert!(upsert_prefix(&mut t, "10.1.0.1/16", 1).is_err());
    }
}
