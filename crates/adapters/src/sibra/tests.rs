//! The SIBRA kinds through the registry: templates verify, parameters are
//! checked with their key, and a live change (parsed by the catalog, applied
//! by `reconfigure`) keeps reservations, revocations and counters.

use pipeline::{Batch, DropReason, Element, Now, Reconfigured, Refused, Stage, Verdict};
use runtime::registry::BuildContext;
use runtime::templates::{tag_for, TemplateCtx, Templates};
use runtime::{Catalog, Registry};
use sibra::stage::{SibraControl, SibraTransit, CLASS_R};
use sibra::{BwClass, ResvKey, SteadyId, Tick};

const KEY: &str = "2b7e151628aed2a6abf7158809cf4f3c";
const STAGE: &str = "key = \"2b7e151628aed2a6abf7158809cf4f3c\"\ninterfaces = [{ ifid = 2, port = 0 }, { ifid = 3, port = 1 }]";
const CONTROL: &str = "key = \"2b7e151628aed2a6abf7158809cf4f3c\"\ninterfaces = [{ ifid = 2, port = 0, capacity_bps = 1000000000 }, { ifid = 3, port = 1, capacity_bps = 1000000000 }]";

fn ctx() -> BuildContext {
    BuildContext { worker: 0, workers: 1, ports: vec![0, 1] }
}

fn registry() -> Registry<Vec<u8>> {
    Registry::with::<crate::All>()
}

fn table(text: &str) -> toml::Table {
    toml::from_str(text).unwrap()
}

fn frames(extra: &str) -> Vec<Vec<u8>> {
    let t = table(&format!(
        "src_ia = \"1-ff00:0:111\"\nsof_key = \"{KEY}\"\nfwd_key = \"{KEY}\"\n{extra}"
    ));
    Templates::with::<crate::All>().build("sibra", &t, &TemplateCtx::new(4, tag_for(0))).unwrap()
}

fn virtual_now() -> Now {
    Now::from_unix_ns(runtime::synthetic::VIRTUAL_UNIX_START_NS)
}

/// Runs `frames` through `parse` and `stage` at `now`.
fn run(stage: &mut dyn Stage<Vec<u8>>, frames: Vec<Vec<u8>>, now: Now) -> Vec<Verdict> {
    let mut parse = registry().build_stage("parse", &ctx(), &toml::Table::new()).unwrap();
    let mut b = Batch::new();
    for f in frames {
        b.push(f, 0).unwrap();
    }
    parse.process(&mut b, now);
    stage.process(&mut b, now);
    (0..b.len()).map(|i| b.meta(i).verdict).collect()
}

fn verdicts(frames: Vec<Vec<u8>>, params: &str) -> Vec<Verdict> {
    let mut st = registry().build_stage("sibra-transit", &ctx(), &table(params)).unwrap();
    run(&mut *st, frames, virtual_now())
}

/// Parses `params` for `kind` as the control plane does for a live change.
fn live(kind: &str, params: &str) -> runtime::registry::Parsed {
    registry().parse_stage(kind, &ctx(), &table(params)).unwrap()
}

fn counters(e: &dyn Element) -> Vec<(&'static str, u64)> {
    let mut v = Vec::new();
    e.named_counters(&mut |n, c| v.push((n, c)));
    e.named_gauges(&mut |n, c| v.push((n, c)));
    v
}

#[test]
fn template_packets_verify_at_the_router_and_forged_ones_do_not() {
    let ok = verdicts(frames("size = 300"), STAGE);
    assert_eq!(ok, vec![Verdict::Forward { port: 1, class: CLASS_R }; 4]);
    let forged = verdicts(frames("forge_sof = true"), STAGE);
    assert_eq!(forged, vec![Verdict::Drop(DropReason::BadMac); 4]);
    // Under another AS key the valid packets are forgeries too.
    let other = STAGE.replace("2b7e", "2b7f");
    assert_eq!(verdicts(frames(""), &other), vec![Verdict::Drop(DropReason::BadMac); 4]);
    assert_eq!(frames("size = 300")[0].len(), 300);
}

#[test]
fn params_are_validated_with_their_key() {
    let r = registry();
    let bad = |kind: &str, base: &str, extra: &str| {
        let t = table(&format!("{base}\n{extra}"));
        r.build_stage(kind, &ctx(), &t).err().unwrap()
    };
    assert_eq!(bad("sibra-transit", STAGE, "local_port = 5").key, "local_port");
    assert_eq!(bad("sibra-transit", STAGE, "monitor = { rows = 9 }").key, "monitor.rows");
    assert_eq!(bad("sibra-transit", STAGE, "requests = \"drop\"").key, "requests");
    let e = bad("sibra-transit", STAGE, "colour = 1");
    assert!(e.reason.contains("unknown field"), "{e}");
    let e =
        bad("sibra-control", CONTROL, "split = { ephemeral = 90, best_effort = 10, steady = 5 }");
    assert_eq!(
        (e.key.as_str(), e.reason.as_str()),
        ("split", "the shares sum to 105%, more than 100%")
    );
    assert_eq!(bad("sibra-control", CONTROL, "max_steady = 0").key, "max_steady");
    let moved = CONTROL.replace("port = 1,", "port = 7,");
    assert_eq!(bad("sibra-control", &moved, "").key, "interfaces[1].port");
    let t = table("src_ia = \"1-ff00:0:111\"\nsof_key = \"00\"\nfwd_key = \"00\"");
    let e = Templates::with::<crate::All>().build("sibra", &t, &TemplateCtx::new(1, tag_for(0)));
    assert_eq!(e.unwrap_err().key, "sof_key");
}

/// A live change of the transit stage: the key rotates (packets under the
/// old key still pass during the grace period), the monitor retunes, the
/// revocations and counters stay; table sizes need a restart.
#[test]
fn transit_changes_in_place_keeping_revocations_and_counters() {
    let r = registry();
    let mut st = r.build_stage("sibra-transit", &ctx(), &table(STAGE)).unwrap();
    let now = virtual_now();
    assert_eq!(
        run(&mut *st, frames(""), now),
        vec![Verdict::Forward { port: 1, class: CLASS_R }; 4]
    );
    let revoked: ResvKey = SteadyId::new(0x66, 1).into();
    let t = st.as_any_mut().unwrap().downcast_mut::<SibraTransit>().unwrap();
    let idx = sibra::ResvIdx::new(3).unwrap();
    t.revocations_mut().revoke(revoked, idx, Tick::of(now).plus(5), Tick::of(now)).unwrap();
    let before = counters(&*st);
    assert_eq!(before[0], ("forwarded", 4));

    // The same parameters: nothing to do.
    assert_eq!(st.reconfigure(&*live("sibra-transit", STAGE), now), Ok(Reconfigured::Unchanged));
    let changed = |monitor: &str| {
        format!("{}\nmonitor = {{ {monitor} }}\nclass = 2", STAGE.replace("2b7e1516", "00000000"))
    };
    let new = changed("window_ms = 250, margin_pct = 25");
    assert_eq!(st.reconfigure(&*live("sibra-transit", &new), now), Ok(Reconfigured::APPLIED));
    assert_eq!(counters(&*st), before, "counters are kept");
    let t = st.as_any_mut().unwrap().downcast_mut::<SibraTransit>().unwrap();
    assert!(t.revocations_mut().is_revoked(&revoked, idx), "revocations are kept");
    assert_eq!(t.monitor_mut().config().window_ns, 250_000_000);
    // Packets under the previous key still verify, in the new class.
    let v = run(&mut *st, frames(""), now);
    assert_eq!(v, vec![Verdict::Forward { port: 1, class: pipeline::Class(2) }; 4]);
    assert_eq!(counters(&*st)[0], ("forwarded", 8));

    // What sizes or keys the monitor's tables needs a restart; nothing changes.
    let rows = changed("window_ms = 250, margin_pct = 25, rows = 2");
    let e = st.reconfigure(&*live("sibra-transit", &rows), now).unwrap_err();
    assert_eq!(e, Refused::NeedsRestart("monitor.rows".into()));
    let t = st.as_any_mut().unwrap().downcast_mut::<SibraTransit>().unwrap();
    assert_eq!(t.monitor_mut().config().window_ns, 250_000_000);
}

/// A steady setup request through `sibra-control` at the router's current
/// time, arriving on interface 2 (port 0) and leaving on 3.
fn steady_setup(now: Now) -> Vec<u8> {
    use packet::Ia;
    use sibra::host;
    let sid = SteadyId::new(0xa, 1);
    let c = BwClass::new(10).unwrap();
    let req = host::request_info(Tick::of(now), 40, c, c);
    let path = host::steady_setup(sid, &[(0, 1), (2, 3), (4, 0)], &req).unwrap();
    let mut pkt =
        host::packet(Ia::new(1, 0xa), [10, 0, 0, 1], Ia::new(1, 0xc), [10, 0, 0, 2], &path, b"")
            .unwrap();
    host::sibra_path_mut(&mut pkt).unwrap().set_curr_hop(1).unwrap();
    pkt
}

/// A live change of the control stage: capacities, split and bindings change
/// in place, reservations and counters stay; table sizes and removing an
/// interface a reservation crosses need a restart.
#[test]
fn control_changes_in_place_keeping_reservations_and_counters() {
    let r = registry();
    let mut st = r.build_stage("sibra-control", &ctx(), &table(CONTROL)).unwrap();
    let now = Now::from_unix_ns(
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
            as u64,
    );
    assert_eq!(
        run(&mut *st, vec![steady_setup(now)], now),
        vec![Verdict::Forward { port: 1, class: CLASS_R }]
    );
    let before = counters(&*st);
    assert!(
        before.contains(&("granted", 1)) && before.contains(&("steady_reservations", 1)),
        "{before:?}"
    );
    let held = |st: &mut Box<dyn Stage<Vec<u8>>>| {
        let c = st.as_any_mut().unwrap().downcast_mut::<SibraControl>().unwrap();
        c.admission().steady_reservations().map(|v| (v.id, v.ingress, v.egress)).collect::<Vec<_>>()
    };
    let want = vec![(SteadyId::new(0xa, 1), 2, 3)];
    assert_eq!(held(&mut st), want);

    assert_eq!(st.reconfigure(&*live("sibra-control", CONTROL), now), Ok(Reconfigured::Unchanged));
    // Capacity, split, a new interface, another class: in place.
    let new = format!(
        "{}\nsplit = {{ ephemeral = 70, best_effort = 20, steady = 10 }}\nclass = 3",
        CONTROL
            .replace(
                "capacity_bps = 1000000000 }]",
                "capacity_bps = 2000000000 }, { ifid = 4, port = 1, capacity_bps = 1 }]"
            )
            .replace("ifid = 3, port = 1,", "ifid = 3, port = 0,")
            .replace("{ ifid = 2, port = 0,", "{ ifid = 2, port = 1,")
            .replace("ifid = 4, port = 1,", "ifid = 4, port = 2,")
    );
    let ctx3 = BuildContext { ports: vec![0, 1, 2], ..ctx() };
    let parsed = r.parse_stage("sibra-control", &ctx3, &table(&new)).unwrap();
    assert_eq!(st.reconfigure(&*parsed, now), Ok(Reconfigured::APPLIED));
    assert_eq!(held(&mut st), want, "reservations are kept");
    assert_eq!(counters(&*st), before, "counters are kept");
    let c = st.as_any_mut().unwrap().downcast_mut::<SibraControl>().unwrap();
    let ifs: Vec<_> =
        c.admission().interfaces().map(|i| (i.ifid, i.capacity_bps, i.split.steady_pct)).collect();
    assert_eq!(ifs, [(2, 1_000_000_000, 10), (3, 2_000_000_000, 10), (4, 1, 10)]);
    assert!(c.admission().steady_used(2, sibra::admission::Dir::In, Tick::of(now)) > 0);

    // Table sizes and removing interface 3 (the reservation leaves on it)
    // need a restart, and leave the stage as it was.
    let e = st.reconfigure(&*live("sibra-control", &format!("{CONTROL}\nmax_steady = 9")), now);
    assert_eq!(e, Err(Refused::NeedsRestart("max_steady".into())));
    let only2 = CONTROL.replace(", { ifid = 3, port = 1, capacity_bps = 1000000000 }", "");
    let e = st.reconfigure(&*live("sibra-control", &only2), now);
    assert_eq!(e, Err(Refused::NeedsRestart("interfaces".into())));
    let c = st.as_any_mut().unwrap().downcast_mut::<SibraControl>().unwrap();
    assert_eq!(c.admission().interfaces().count(), 3);
    assert_eq!(held(&mut st), want);
}
