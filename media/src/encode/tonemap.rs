//! Tone-mapping an HDR source to SDR for one rendition: an FFmpeg filter graph (zimg's
//! `zscale` and `tonemap`) in place of the plain scaler.
//!
//! Why a filter graph: swscale only rescales and converts matrices; it knows nothing of PQ or
//! HLG, so an HDR source scaled into an 8-bit BT.709 encoder comes out grey and flat (the
//! "washed-out" look). The chain itself is `hdr::tonemap_filter`.

use ffmpeg_next as ff;

use crate::MediaError;
use tessera_model::probe::ColorInfo;

/// One rendition's tone-mapping graph, built for the frames' format and size.
pub(crate) struct Tonemapper {
    graph: ff::filter::Graph,
    input: (ff::format::Pixel, u32, u32),
}

impl Tonemapper {
    /// A graph from frames like `frame` to 8-bit BT.709 `width`x`height`.
    pub(crate) fn new(
        frame: &ff::frame::Video,
        color: &ColorInfo,
        width: u32,
        height: u32,
    ) -> Result<Tonemapper, MediaError> {
        let format = frame.format();
        let name = format
            .descriptor()
            .map(|d| d.name())
            .ok_or_else(|| MediaError::encode("tonemap", "frame without a pixel format"))?;
        let mut graph = ff::filter::Graph::new();
        let args = format!(
            "video_size={}x{}:pix_fmt={name}:time_base=1/90000:pixel_aspect=1/1",
            frame.width(),
            frame.height()
        );
        let find = |n: &str| {
            ff::filter::find(n).ok_or_else(|| {
                MediaError::encode("tonemap", format!("filter {n} not in this FFmpeg build"))
            })
        };
        let step = |what: &'static str| {
            move |e: ff::Error| MediaError::encode("tonemap", format!("{what}: {e}"))
        };
        graph
            .add(&find("buffer")?, "in", &args)
            .map_err(step("source"))?;
        graph
            .add(&find("buffersink")?, "out", "")
            .map_err(step("sink"))?;
        let spec = tessera_model::settings::hdr::tonemap_filter(color, width, height);
        graph
            .output("in", 0)
            .and_then(|p| p.input("out", 0))
            .and_then(|p| p.parse(&spec))
            .map_err(step("chain"))?;
        graph.validate().map_err(step("graph"))?;
        Ok(Tonemapper {
            graph,
            input: (format, frame.width(), frame.height()),
        })
    }

    /// Whether frames like `frame` fit the graph (a mid-stream size change needs a new one).
    pub(crate) fn fits(&self, frame: &ff::frame::Video) -> bool {
        self.input == (frame.format(), frame.width(), frame.height())
    }

    /// Tone-maps one frame (the chain is one frame in, one frame out).
    pub(crate) fn run(&mut self, frame: &ff::frame::Video) -> Result<ff::frame::Video, MediaError> {
        let fail = |e: ff::Error| MediaError::encode("tonemap", e);
        let mut input = self
            .graph
            .get("in")
            .ok_or_else(|| MediaError::encode("tonemap", "graph lost its input"))?;
        input
            .source()
            .add(frame)
            .map_err(|e| MediaError::encode("tonemap", format!("frame in: {e}")))?;
        let mut output = self
            .graph
            .get("out")
            .ok_or_else(|| MediaError::encode("tonemap", "graph lost its output"))?;
        let mut out = ff::frame::Video::empty();
        output.sink().frame(&mut out).map_err(fail)?;
        Ok(out)
    }
}
