//! gRPC health and reflection as probes and tools see them: without the
//! bearer token, per service, and turning NOT_SERVING when the router stops.
//!
//! The tests run on a multi-threaded runtime: `shutdown` blocks its thread
//! while the server drains the test's own connection, which another runtime
//! thread must keep driving.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tonic::transport::{Channel, Endpoint};
use tonic::Code;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;
use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
use tonic_reflection::pb::v1::ServerReflectionRequest;

const TOKEN: &str = "health-test-token-0123456789abcdef";
const ROUTER: &str = "ddos.control.v1.RouterControl";
const HEALTH: &str = "grpc.health.v1.Health";
const REFLECTION: &str = "grpc.reflection.v1.ServerReflection";

/// A router with the runtime's generic stages only (no protocol services)
/// and its control server with a token; `run` adds keys under `[run]`.
fn start(name: &str, run: &str) -> (Arc<control::Plane>, control::ServerHandle) {
    let dir = std::env::temp_dir().join(format!("control-health-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("token"), format!("{TOKEN}\n")).unwrap();
    let text = format!(
        r#"
        [io]
        backend = "synthetic"
        [io.synthetic]
        pacing = "wall"
        traffic = [{{ name = "web", port = 0, rate_pps = 1000, template = "ipv4-udp" }}]
        [workers]
        pin = false
        [[ports]]
        id = 0
        [[ports]]
        id = 1
        [[pipeline]]
        kind = "port-forward"
        port = 1
        [run]
        {run}
        "#
    );
    let cfg = runtime::config::parse(&text, format!("{name}.toml").as_ref()).unwrap();
    let plane = control::Plane::new(runtime::start::<()>(cfg.clone()).unwrap(), cfg);
    let ccfg = control::ControlConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        metrics_listen: None,
        token_file: Some(dir.join("token")),
        ..Default::default()
    };
    let server = control::serve::<()>(plane.clone(), &ccfg).unwrap();
    (plane, server)
}

async fn channel(server: &control::ServerHandle) -> Channel {
    Endpoint::from_shared(format!("http://{}", server.grpc_addr)).unwrap().connect().await.unwrap()
}

/// Health's answer for `service`, without a token.
async fn check(ch: &Channel, service: &str) -> Result<ServingStatus, Code> {
    HealthClient::new(ch.clone())
        .check(HealthCheckRequest { service: service.into() })
        .await
        .map(|r| ServingStatus::try_from(r.into_inner().status).unwrap())
        .map_err(|s| s.code())
}

/// One reflection request with `token` (if any): its answer.
async fn reflect(
    ch: &Channel,
    token: Option<&str>,
    req: MessageRequest,
) -> Result<MessageResponse, tonic::Status> {
    let header = token.map(|t| format!("Bearer {t}").parse().unwrap());
    let mut c =
        ServerReflectionClient::with_interceptor(ch.clone(), move |mut r: tonic::Request<()>| {
            if let Some(h) = &header {
                r.metadata_mut().insert("authorization", tonic::metadata::MetadataValue::clone(h));
            }
            Ok(r)
        });
    let msg = ServerReflectionRequest { host: String::new(), message_request: Some(req) };
    let mut answers =
        c.server_reflection_info(tonic::codegen::tokio_stream::iter([msg])).await?.into_inner();
    let first = answers.message().await?.expect("one answer");
    Ok(first.message_response.expect("a response"))
}

/// The services reflection lists for a caller with `token`.
async fn listed(ch: &Channel, token: Option<&str>) -> Vec<String> {
    match reflect(ch, token, MessageRequest::ListServices(String::new())).await.unwrap() {
        MessageResponse::ListServicesResponse(l) => {
            let mut v: Vec<String> = l.service.into_iter().map(|s| s.name).collect();
            v.sort();
            v
        }
        other => panic!("unexpected answer {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_answers_for_the_server_and_each_service_without_a_token() {
    let (plane, server) = start("per-service", "");
    assert_eq!(server.services, vec![ROUTER]);
    let ch = channel(&server).await;
    assert_eq!(check(&ch, "").await, Ok(ServingStatus::Serving));
    for s in &server.services {
        assert_eq!(check(&ch, s).await, Ok(ServingStatus::Serving), "{s}");
    }
    // Unknown names are NOT_FOUND, as the health protocol says.
    assert_eq!(check(&ch, "ddos.control.v1.NoSuchService").await, Err(Code::NotFound));
    // The control API itself still needs the token.
    let e = control::pb::router_control_client::RouterControlClient::new(ch.clone())
        .get_status(control::pb::GetStatusRequest {})
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated);
    plane.stop();
    server.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflection_shows_health_to_everyone_and_the_rest_with_the_token() {
    let (plane, server) = start("reflection", "");
    let ch = channel(&server).await;
    let public = vec![HEALTH.to_string(), REFLECTION.to_string()];
    assert_eq!(listed(&ch, None).await, public);
    assert_eq!(listed(&ch, Some("wrong-token-0123456789abcdef")).await, public);
    let all = listed(&ch, Some(TOKEN)).await;
    for s in [ROUTER, HEALTH, REFLECTION] {
        assert!(all.iter().any(|a| a == s), "{s} not in {all:?}");
    }
    // What a tool needs to call health (grpcurl resolves the method first).
    let health = reflect(&ch, None, MessageRequest::FileContainingSymbol(HEALTH.into())).await;
    assert!(matches!(health, Ok(MessageResponse::FileDescriptorResponse(_))), "{health:?}");
    let router = reflect(&ch, None, MessageRequest::FileContainingSymbol(ROUTER.into())).await;
    assert_eq!(router.unwrap_err().code(), Code::NotFound);
    let router = reflect(&ch, Some(TOKEN), MessageRequest::FileContainingSymbol(ROUTER.into()));
    assert!(matches!(router.await, Ok(MessageResponse::FileDescriptorResponse(_))));
    plane.stop();
    server.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statuses_turn_not_serving_when_the_router_is_stopped() {
    let (plane, server) = start("stop", "");
    let ch = channel(&server).await;
    let mut watch = HealthClient::new(ch.clone())
        .watch(HealthCheckRequest { service: ROUTER.into() })
        .await
        .unwrap()
        .into_inner();
    let status = |m: Option<tonic_health::pb::HealthCheckResponse>| {
        ServingStatus::try_from(m.expect("a status").status).unwrap()
    };
    assert_eq!(status(watch.message().await.unwrap()), ServingStatus::Serving);
    plane.stop();
    let next = tokio::time::timeout(Duration::from_secs(5), watch.message()).await;
    assert_eq!(status(next.expect("NOT_SERVING within 5 s").unwrap()), ServingStatus::NotServing);
    assert_eq!(check(&ch, "").await, Ok(ServingStatus::NotServing));
    assert_eq!(check(&ch, ROUTER).await, Ok(ServingStatus::NotServing));
    // A watch is a stream the server would wait for while it drains.
    drop(watch);
    server.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statuses_turn_not_serving_when_the_run_ends_by_itself() {
    let (_plane, server) = start("end", "duration_ms = 200");
    let ch = channel(&server).await;
    let t = Instant::now();
    while check(&ch, "").await != Ok(ServingStatus::NotServing) {
        assert!(t.elapsed() < Duration::from_secs(10), "still SERVING after the run ended");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(check(&ch, ROUTER).await, Ok(ServingStatus::NotServing));
    server.shutdown();
}
