//! A client of every control service, with the bearer token attached to
//! each call (used by `ctl` and by tests).

use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};
use tonic::{Request, Status};

use crate::pb;

/// Adds `authorization: Bearer <token>` to every request.
#[derive(Clone, Debug)]
pub struct Bearer(Option<MetadataValue<Ascii>>);

impl tonic::service::Interceptor for Bearer {
    fn call(&mut self, mut req: Request<()>) -> Result<Request<()>, Status> {
        if let Some(v) = &self.0 {
            req.metadata_mut().insert("authorization", v.clone());
        }
        Ok(req)
    }
}

/// The transport with the token interceptor.
pub type Authed = InterceptedService<Channel, Bearer>;

/// Errors while connecting.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The address is not a valid URI.
    #[error("bad address `{0}`")]
    Address(String),
    /// The token cannot be sent as metadata.
    #[error("the token is not printable ASCII")]
    Token,
    /// Reading the token file failed.
    #[error("token file `{0}`: {1}")]
    TokenFile(String, std::io::Error),
    /// Connecting failed.
    #[error("connecting to {0}: {1}")]
    Transport(String, tonic::transport::Error),
}

/// Clients of every control service over one channel.
#[derive(Clone, Debug)]
pub struct Client {
    channel: Channel,
    bearer: Bearer,
}

impl Client {
    /// Connects to `addr` (`host:port` or `http://host:port`) with an optional token.
    pub async fn connect(addr: &str, token: Option<&str>) -> Result<Client, ConnectError> {
        let uri = if addr.contains("://") { addr.to_string() } else { format!("http://{addr}") };
        let ep = Endpoint::from_shared(uri.clone())
            .map_err(|_| ConnectError::Address(addr.to_string()))?
            .connect_timeout(std::time::Duration::from_secs(5))
            .tcp_nodelay(true);
        let channel = ep.connect().await.map_err(|e| ConnectError::Transport(uri, e))?;
        let bearer = match token {
            Some(t) => Bearer(Some(
                format!("Bearer {}", t.trim()).parse().map_err(|_| ConnectError::Token)?,
            )),
            None => Bearer(None),
        };
        Ok(Client { channel, bearer })
    }

    /// Reads the token from `path` and connects.
    pub async fn connect_with_token_file(
        addr: &str,
        path: &std::path::Path,
    ) -> Result<Client, ConnectError> {
        let t = std::fs::read_to_string(path)
            .map_err(|e| ConnectError::TokenFile(path.display().to_string(), e))?;
        Client::connect(addr, Some(&t)).await
    }

    fn authed(&self) -> Authed {
        InterceptedService::new(self.channel.clone(), self.bearer.clone())
    }

    /// `RouterControl`.
    pub fn router(&self) -> pb::router_control_client::RouterControlClient<Authed> {
        pb::router_control_client::RouterControlClient::new(self.authed())
    }

    /// `ZlaneControl`.
    pub fn zlane(&self) -> pb::zlane_control_client::ZlaneControlClient<Authed> {
        pb::zlane_control_client::ZlaneControlClient::new(self.authed())
    }

    /// `SibraControl`.
    pub fn sibra(&self) -> pb::sibra_control_client::SibraControlClient<Authed> {
        pb::sibra_control_client::SibraControlClient::new(self.authed())
    }

    /// `FlowPoliceControl`.
    pub fn flowpolice(&self) -> pb::flow_police_control_client::FlowPoliceControlClient<Authed> {
        pb::flow_police_control_client::FlowPoliceControlClient::new(self.authed())
    }

    /// `FairControl`.
    pub fn fair(&self) -> pb::fair_control_client::FairControlClient<Authed> {
        pb::fair_control_client::FairControlClient::new(self.authed())
    }

    /// `DrkeyControl`.
    pub fn drkey(&self) -> pb::drkey_control_client::DrkeyControlClient<Authed> {
        pb::drkey_control_client::DrkeyControlClient::new(self.authed())
    }
}
